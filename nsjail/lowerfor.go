package nsjail

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

// LowerFor decides whether a request, built as job (its own Spec, limits
// and timers, as for a cold run), may run in a sandbox started for pooled
// (a warm sandbox of the same profile), and returns the Lower that makes
// the pooled sandbox the request's: its wall and CPU time, memory, pids
// and rlimits where the request's are lower. It refuses (with why) when
// anything else differs: the mount plan (a smaller workspace is a tmpfs
// mounted at Start), the environment (per-request additions belong in
// Payload.Env), the seccomp policy, the output cap, the CPUs, a proxy, or a
// limit the request raises. The caller then runs
// cold. Spec.ID and Spec.Warm are not compared.
func LowerFor(pooled, job *Job) (*Lower, error) {
	if job.Proxy != nil || pooled.Proxy != nil {
		return nil, fmt.Errorf("a proxy is set at Start")
	}
	if job.OutputLimit != pooled.OutputLimit || job.Limits.CPUs != pooled.Limits.CPUs ||
		job.Limits.OutputKill != pooled.Limits.OutputKill || job.Limits.RequireCgroup != pooled.Limits.RequireCgroup {
		return nil, fmt.Errorf("output cap, output policy, CPUs or require differ")
	}
	a, b := pooled.Spec, job.Spec
	a.ID, b.ID, a.Warm, b.Warm = "", "", nil, nil
	a.Rlimits, b.Rlimits = nil, nil
	ja, err1 := json.Marshal(&a)
	jb, err2 := json.Marshal(&b)
	if err1 != nil || err2 != nil || string(ja) != string(jb) {
		return nil, fmt.Errorf("the Specs differ beyond the id and the rlimits")
	}
	l := &Lower{}
	// lower is what one limit is lowered to, 0 for unchanged; 0 is "no
	// limit" on both sides, so a request without one raises it.
	lower := func(name string, req, have int64) (int64, error) {
		switch {
		case req == have:
			return 0, nil
		case have == 0:
			return 0, fmt.Errorf("%s %d: the pooled sandbox has none to lower", name, req)
		case req == 0 || req > have:
			return 0, fmt.Errorf("%s %d above the pooled sandbox's %d", name, req, have)
		}
		return req, nil
	}
	d, err := lower("wall time", int64(job.Timeout), int64(pooled.Timeout))
	if err != nil {
		return nil, err
	}
	l.Timeout = time.Duration(d)
	if d, err = lower("cpu time", int64(job.Limits.CPUTime), int64(pooled.Limits.CPUTime)); err != nil {
		return nil, err
	}
	l.CPUTime = time.Duration(d)
	if l.MemoryBytes, err = lower("memory", job.Limits.MemoryBytes, pooled.Limits.MemoryBytes); err != nil {
		return nil, err
	}
	if l.Pids, err = lower("pids", job.Limits.Pids, pooled.Limits.Pids); err != nil {
		return nil, err
	}
	for _, r := range job.Spec.Rlimits {
		have := rlimitFor(pooled.Spec.Rlimits, r.Resource)
		switch {
		case have == nil:
			return nil, fmt.Errorf("%s: the pooled sandbox has none", r.Resource)
		case *have == r:
		case r.Resource == "RLIMIT_CORE" || r.Resource == "RLIMIT_CPU":
			return nil, fmt.Errorf("%s differs (the sandbox's own)", r.Resource)
		case r.Soft > have.Soft || r.Hard > have.Hard:
			return nil, fmt.Errorf("%s %d/%d above the pooled sandbox's %d/%d", r.Resource, r.Soft, r.Hard, have.Soft, have.Hard)
		default:
			l.Rlimits = append(l.Rlimits, r)
		}
	}
	if len(job.Spec.Rlimits) != len(pooled.Spec.Rlimits) {
		return nil, fmt.Errorf("the rlimits set differ")
	}
	if reflect.DeepEqual(*l, Lower{}) {
		return nil, nil
	}
	return l, nil
}
