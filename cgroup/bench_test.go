package cgroup

// Costs of the hot path. Benchmarks print figures; they never fail on time.
//
//   go test -run '^$' -bench . -benchtime 200x ./cgroup/
//   go test -run '^$' -bench 'Attach|Placement' -benchtime 20x ./cgroup/
//
// In the VM: .../run-in-vm.sh -e SBX_CGROUP_WANT=cgroup2 /var/tmp/sbx-cgtest/cg.test -test.run '^$' -test.bench . -test.benchtime 50x

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// idleGap is longer than the ~30 ms after which a v1 attach pays a full
// RCU grace period again (measured on 6.18: 20-25 ms cheap, 35+ ms not).
const idleGap = 100 * time.Millisecond

var benchLimits = Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1}

func benchGroup(b *testing.B, l Limits) *Group {
	b.Helper()
	idSeq++
	g, err := New(fmt.Sprintf("bench%d-%d", os.Getpid(), idSeq), l)
	if err != nil {
		b.Skipf("no cgroup here: %v", err)
	}
	b.Cleanup(func() {
		g.Kill()
		if err := g.Destroy(); err != nil {
			b.Error(err)
		}
	})
	return g
}

func BenchmarkNew(b *testing.B) {
	var gs []*Group
	b.Cleanup(func() {
		for _, g := range gs {
			g.Destroy()
		}
	})
	for i := 0; b.Loop(); i++ {
		g, err := New(fmt.Sprintf("bench%d-new%d", os.Getpid(), i), benchLimits)
		if err != nil {
			b.Skipf("no cgroup here: %v", err)
		}
		gs = append(gs, g)
	}
}

func BenchmarkDestroyEmpty(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		g, err := New(fmt.Sprintf("bench%d-destroy%d", os.Getpid(), i), benchLimits)
		if err != nil {
			b.Skipf("no cgroup here: %v", err)
		}
		b.StartTimer()
		if err := g.Destroy(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDestroyAfterKill: Kill and Destroy of a group whose one process
// (a helper) is running, i.e. the end of every run.
func BenchmarkKillDestroy(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		g, err := New(fmt.Sprintf("bench%d-kill%d", os.Getpid(), i), benchLimits)
		if err != nil {
			b.Skipf("no cgroup here: %v", err)
		}
		h := startHelper(b, g, "sleep")
		b.StartTimer()
		if err := g.Kill(); err != nil {
			b.Fatal(err)
		}
		if err := g.Destroy(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		h.wait(b, 10*time.Second)
		b.StartTimer()
	}
}

// BenchmarkAttach moves one process back and forth between two groups.
func BenchmarkAttach(b *testing.B) {
	for _, gap := range []time.Duration{0, idleGap} {
		b.Run(fmt.Sprintf("gap=%v", gap), func(b *testing.B) {
			g1, g2 := benchGroup(b, benchLimits), benchGroup(b, benchLimits)
			h := startHelper(b, nil, "sleep")
			pid := h.cmd.Process.Pid
			for i := 0; i < b.N; i++ {
				g := g1
				if i%2 == 1 {
					g = g2
				}
				if gap > 0 {
					b.StopTimer()
					time.Sleep(gap)
					b.StartTimer()
				}
				if err := g.Attach(pid); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCPUUsage(b *testing.B) {
	g := benchGroup(b, benchLimits)
	for b.Loop() {
		if _, err := g.CPUUsage(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStats(b *testing.B) {
	g := benchGroup(b, benchLimits)
	for b.Loop() {
		if _, err := g.Stats(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCleanupStaleNothingToDo(b *testing.B) {
	benchGroup(b, benchLimits) // one live group to skip
	for b.Loop() {
		if err := CleanupStale(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlacement answers: on v1, should the supervisor attach the init
// before it lets it work, or while it works? Each iteration starts a helper
// (the init's stand-in), places it, and lets it do work that looks like the
// init's setup; the time is from Start to the helper's "done". Every
// iteration follows an idle gap, as a single sbx exec would.
//
//	none:       no cgroup at all (the floor)
//	attach-then-go: Attach, then "go" (the payload can never run outside)
//	go-then-attach: "go", then Attach concurrently with the work (the
//	            init must then wait for "attached" before it forks the payload)
//	clone-into: v2 only, born inside with CLONE_INTO_CGROUP
func BenchmarkPlacement(b *testing.B) {
	for _, work := range []string{"syscalls", "forks"} {
		for _, how := range []string{"none", "attach-then-go", "go-then-attach", "clone-into"} {
			b.Run(work+"/"+how, func(b *testing.B) {
				g := benchGroup(b, benchLimits)
				if how == "clone-into" && g.Mode() != ModeV2 {
					b.Skip("CLONE_INTO_CGROUP needs cgroup v2")
				}
				var attachSum, workSum time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					time.Sleep(idleGap)
					b.StartTimer()
					var place *Group
					if how == "clone-into" {
						place = g
					}
					h := startHelper(b, place, "work", "WORK="+work)
					pid := h.cmd.Process.Pid
					switch how {
					case "attach-then-go":
						t0 := time.Now()
						if err := g.Attach(pid); err != nil {
							b.Fatal(err)
						}
						attachSum += time.Since(t0)
						h.start(b)
					case "go-then-attach":
						h.start(b)
						t0 := time.Now()
						if err := g.Attach(pid); err != nil {
							b.Fatal(err)
						}
						attachSum += time.Since(t0)
					default:
						h.start(b)
					}
					var us int64
					if l := h.line(b, time.Minute); !strings.HasPrefix(l, "done ") {
						b.Fatalf("helper said %q", l)
					} else {
						us, _ = strconv.ParseInt(l[5:], 10, 64)
					}
					workSum += time.Duration(us) * time.Microsecond
					b.StopTimer()
					h.kill()
					b.StartTimer()
				}
				b.ReportMetric(float64(workSum.Microseconds())/float64(b.N), "work-µs/op")
				if attachSum > 0 {
					b.ReportMetric(float64(attachSum.Microseconds())/float64(b.N), "attach-µs/op")
				}
			})
		}
	}
}

// BenchmarkDiscover: the layout discovery every sbx exec runs once
// (/proc/self/cgroup, /proc/self/mountinfo, the access checks).
func BenchmarkDiscover(b *testing.B) {
	for b.Loop() {
		if _, err := discover(); err != nil {
			b.Fatal(err)
		}
	}
}
