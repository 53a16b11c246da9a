package nsjail

import (
	"strings"
	"testing"
	"time"
)

func TestLowerFor(t *testing.T) {
	base := func() *Job {
		return &Job{
			Spec:        Spec{ID: "a", Env: []string{"A=1"}, Workdir: "/workspace", Rlimits: []Rlimit{{Resource: "RLIMIT_CORE", Soft: 1, Hard: 1}, {Resource: "RLIMIT_NOFILE", Soft: 1024, Hard: 1024}}},
			OutputLimit: 1 << 20, Timeout: time.Minute,
			Limits: Limits{MemoryBytes: 1 << 30, Pids: 256, CPUs: 2, CPUTime: 30 * time.Second},
		}
	}
	for _, tc := range []struct {
		name string
		edit func(j *Job)
		want *Lower
		err  string
	}{
		{"same but the id", func(j *Job) { j.Spec.ID = "b"; j.Spec.Warm = &Warm{Interpreter: "python3"} }, nil, ""},
		{"lowered", func(j *Job) {
			j.Timeout, j.Limits.CPUTime, j.Limits.MemoryBytes, j.Limits.Pids = time.Second, time.Second, 1<<20, 8
			j.Spec.Rlimits[1] = Rlimit{Resource: "RLIMIT_NOFILE", Soft: 64, Hard: 64}
		}, &Lower{Timeout: time.Second, CPUTime: time.Second, MemoryBytes: 1 << 20, Pids: 8, Rlimits: []Rlimit{{Resource: "RLIMIT_NOFILE", Soft: 64, Hard: 64}}}, ""},
		{"raised memory", func(j *Job) { j.Limits.MemoryBytes = 2 << 30 }, nil, "above"},
		{"no wall limit", func(j *Job) { j.Timeout = 0 }, nil, "above"},
		{"raised nofile", func(j *Job) { j.Spec.Rlimits[1].Hard = 4096 }, nil, "above"},
		{"core", func(j *Job) { j.Spec.Rlimits[0] = Rlimit{Resource: "RLIMIT_CORE", Soft: 0, Hard: 0} }, nil, "sandbox's own"},
		{"env", func(j *Job) { j.Spec.Env = []string{"A=2"} }, nil, "Specs differ"},
		{"workdir", func(j *Job) { j.Spec.Workdir = "/w" }, nil, "Specs differ"},
		{"output cap", func(j *Job) { j.OutputLimit = 10 }, nil, "output cap"},
		// The output dir and the timings are the execution's (IO), not
		// the sandbox's: a request with them still fits a pooled one.
		{"output dir and timings", func(j *Job) { j.OutputDir, j.Timings = "/out", &strings.Builder{} }, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := base()
			tc.edit(j)
			got, err := LowerFor(base(), j)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("LowerFor: %v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) || got != nil && (got.Timeout != tc.want.Timeout || got.CPUTime != tc.want.CPUTime ||
				got.MemoryBytes != tc.want.MemoryBytes || got.Pids != tc.want.Pids || len(got.Rlimits) != len(tc.want.Rlimits)) {
				t.Errorf("LowerFor = %+v, want %+v", got, tc.want)
			}
		})
	}
}
