package cgroup

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// Pure logic: no cgroup is touched.

// mountinfo of the hybrid dev machine (trimmed), of a pure v2 host, and of
// a container whose cgroupfs is a bind of its own subtree.
const (
	hybridMountinfo = `23 1 0:22 / / rw,relatime - overlay overlay rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw`
	hybridProcCgroup = `9:name=systemd:/
8:pids:/
6:freezer:/
4:memory:/process_api/4e96
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/`
	comountedMountinfo = `32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup rw,memory`
	comountedProcCgroup = `3:memory:/user.slice
2:cpu,cpuacct:/user.slice
1:name=systemd:/user.slice/session-1.scope`
	pureV2Mountinfo  = `30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot`
	bindMountinfo    = `40 30 0:26 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw`
	spaceMountinfo   = `40 30 0:26 / /mnt/my\040cgroups rw - cgroup2 cgroup2 rw`
	supervisorCgroup = `0::/user.slice/app.scope/sbx-supervisor-4242`
)

func TestParseAndResolve(t *testing.T) {
	tests := []struct {
		name       string
		mountinfo  string
		proc       string
		wantV2     *hierarchy
		wantV1     []hierarchy
		wantParseE bool
	}{
		{
			name:      "hybrid: v2 mount at its root, memory nested, the rest at the root",
			mountinfo: hybridMountinfo, proc: hybridProcCgroup,
			wantV2: &hierarchy{mount: "/sys/fs/cgroup/unified", base: "/sys/fs/cgroup/unified", own: "/sys/fs/cgroup/unified"},
			wantV1: []hierarchy{
				{controllers: []string{"cpu"}, mount: "/sys/fs/cgroup/cpu", base: "/sys/fs/cgroup/cpu", cgroupPath: "/"},
				{controllers: []string{"cpuacct"}, mount: "/sys/fs/cgroup/cpuacct", base: "/sys/fs/cgroup/cpuacct", cgroupPath: "/"},
				{controllers: []string{"memory"}, mount: "/sys/fs/cgroup/memory", base: "/sys/fs/cgroup/memory/process_api/4e96", cgroupPath: "/process_api/4e96"},
				{controllers: []string{"freezer"}, mount: "/sys/fs/cgroup/freezer", base: "/sys/fs/cgroup/freezer", cgroupPath: "/"},
				{controllers: []string{"pids"}, mount: "/sys/fs/cgroup/pids", base: "/sys/fs/cgroup/pids", cgroupPath: "/"},
			},
		},
		{
			name:      "co-mounted cpu,cpuacct share one directory",
			mountinfo: comountedMountinfo, proc: comountedProcCgroup,
			wantV1: []hierarchy{
				{controllers: []string{"cpu", "cpuacct"}, mount: "/sys/fs/cgroup/cpu,cpuacct", base: "/sys/fs/cgroup/cpu,cpuacct/user.slice", cgroupPath: "/user.slice"},
				{controllers: []string{"memory"}, mount: "/sys/fs/cgroup/memory", base: "/sys/fs/cgroup/memory/user.slice", cgroupPath: "/user.slice"},
			},
		},
		{
			name: "pure v2", mountinfo: pureV2Mountinfo, proc: "0::/user.slice/user-1000.slice/app.scope\n",
			wantV2: &hierarchy{mount: "/sys/fs/cgroup", base: "/sys/fs/cgroup/user.slice/user-1000.slice/app.scope", own: "/sys/fs/cgroup/user.slice/user-1000.slice/app.scope"},
		},
		{
			name: "inside a supervisor leaf: the base is its parent", mountinfo: pureV2Mountinfo, proc: supervisorCgroup,
			wantV2: &hierarchy{mount: "/sys/fs/cgroup", base: "/sys/fs/cgroup/user.slice/app.scope", own: "/sys/fs/cgroup/user.slice/app.scope/sbx-supervisor-4242"},
		},
		{
			name: "bind mount of the own subtree (container without cgroupns)", mountinfo: bindMountinfo, proc: "0::/docker/abc/x\n",
			wantV2: &hierarchy{mount: "/sys/fs/cgroup", base: "/sys/fs/cgroup/x", own: "/sys/fs/cgroup/x"},
		},
		{
			name: "bind mount of another subtree: not visible", mountinfo: bindMountinfo, proc: "0::/system.slice/foo\n",
		},
		{
			name: "escaped mount point", mountinfo: spaceMountinfo, proc: "0::/a\n",
			wantV2: &hierarchy{mount: "/mnt/my cgroups", base: "/mnt/my cgroups/a", own: "/mnt/my cgroups/a"},
		},
		{name: "garbage /proc/self/cgroup", mountinfo: pureV2Mountinfo, proc: "nonsense\n", wantParseE: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := parseProcCgroup([]byte(tc.proc))
			if tc.wantParseE {
				if err == nil {
					t.Fatalf("parseProcCgroup(%q) = nil error", tc.proc)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mounts, err := parseMountinfo([]byte(tc.mountinfo))
			if err != nil {
				t.Fatal(err)
			}
			v2, v1 := resolve(pc, mounts)
			if !reflect.DeepEqual(v2, tc.wantV2) {
				t.Errorf("v2 = %+v, want %+v", v2, tc.wantV2)
			}
			if !reflect.DeepEqual(v1, tc.wantV1) {
				t.Errorf("v1 = %+v\nwant %+v", v1, tc.wantV1)
			}
		})
	}
}

func TestParseMountinfoRejectsBrokenLines(t *testing.T) {
	for _, s := range []string{"31 23 0:28 / /sys/fs/cgroup rw", "1 2 - cgroup"} {
		if _, err := parseMountinfo([]byte(s)); err == nil {
			t.Errorf("parseMountinfo(%q) = nil error", s)
		}
	}
}

func TestDecideWithoutHierarchies(t *testing.T) {
	l := decide(nil, nil)
	if l.mode != ModeNone || !errors.Is(l.why, ErrUnavailable) {
		t.Fatalf("decide(nil, nil) = %v, %v; want none, ErrUnavailable", l.mode, l.why)
	}
}

func TestKeyValue(t *testing.T) {
	const cpuStat = "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\nnr_periods 0\n"
	const oom = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
	tests := []struct {
		content, key string
		want         int64
		ok           bool
	}{
		{cpuStat, "usage_usec", 1234, true},
		{cpuStat, "system_usec", 234, true},
		{cpuStat, "user", 0, false}, // a prefix of a key is not the key
		{oom, "oom_kill", 3, true},
		{oom, "oom_kill_disable", 0, true},
		{"max 7", "max", 7, true}, // no trailing newline
		{"max x\n", "max", 0, false},
		{"", "max", 0, false},
	}
	for _, tc := range tests {
		got, ok := keyValue([]byte(tc.content), tc.key)
		if got != tc.want || ok != tc.ok {
			t.Errorf("keyValue(%q, %q) = %d, %v; want %d, %v", tc.content, tc.key, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseUint(t *testing.T) {
	for in, want := range map[string]int64{"0\n": 0, "667102531542\n": 667102531542, "5": 5} {
		if got, err := parseUint([]byte(in)); err != nil || got != want {
			t.Errorf("parseUint(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "\n", "12a\n", "-1\n"} {
		if _, err := parseUint([]byte(in)); err == nil {
			t.Errorf("parseUint(%q) = nil error", in)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	good := []Limits{{}, {MemoryBytes: 64 << 20, Pids: 16, CPUs: 0.5}, {CPUs: 0.01}, {CPUs: 64}}
	for _, l := range good {
		if err := l.validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
	bad := map[string]Limits{
		"memory": {MemoryBytes: -1}, "pids": {Pids: -5}, "cpus": {CPUs: -0.5},
		"below the kernel's minimum": {CPUs: 0.005}, "not a non-negative number": {CPUs: math.NaN()},
	}
	for want, l := range bad {
		if err := l.validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want one mentioning %q", l, err, want)
		}
	}
}

func TestCPUQuota(t *testing.T) {
	for cpus, want := range map[float64]int64{0.5: 50000, 1: 100000, 2.5: 250000, 0.01: 1000, 0.333: 33300} {
		if got := cpuQuotaUS(cpus); got != want {
			t.Errorf("cpuQuotaUS(%v) = %d, want %d", cpus, got, want)
		}
	}
}

func TestCheckID(t *testing.T) {
	for _, id := range []string{"a", "run-01HZX", "x.y_z", strings.Repeat("a", 128)} {
		if err := checkID(id); err != nil {
			t.Errorf("checkID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", "a/b", "..", ".", "a b", "supervisor-1", strings.Repeat("a", 129), "ü"} {
		if err := checkID(id); err == nil {
			t.Errorf("checkID(%q) = nil", id)
		}
	}
}

// TestV1PathOf: JoinThread's check of /proc/thread-self/cgroup finds the
// same path for every controller as parseProcCgroup does.
func TestV1PathOf(t *testing.T) {
	in := []byte("12:name=systemd:/\n4:memory:/a/b\n2:cpu,cpuacct:/c\n0::/d\n")
	pc, err := parseProcCgroup(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"memory", "cpu", "cpuacct", "name=systemd", "pids"} {
		got, err := v1PathOf(in, c)
		if err != nil || got != pc.v1Path[c] {
			t.Errorf("v1PathOf(%q) = %q, %v; parseProcCgroup says %q", c, got, err, pc.v1Path[c])
		}
	}
	if _, err := v1PathOf([]byte("4memory/a\n"), "memory"); err == nil {
		t.Error("v1PathOf of a line without colons: nil error")
	}
}
