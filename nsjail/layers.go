package nsjail

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sbx-sandbox/sbx/seccomp/policyname"
)

// fillLayers states every layer of the run. It is called once the run is
// over, from what the supervisor set up and what the init reported.
func (s *supervisor) fillLayers(exit *StatusMsg) {
	spec := &s.job.Spec
	uid, _ := hostIDs(spec.ID)
	l := map[string]Layer{
		"namespaces": {State: LayerOn, Detail: "user, mount, pid, net, ipc, uts and cgroup namespaces of its own; pid 1 is " + s.initExe.Describe()},
		"identity":   {State: LayerOn, Detail: fmt.Sprintf("uid %d inside, host uid %d (never host root)", spec.UID, uid)},
		"privileges": {State: LayerOn, Detail: "every capability set empty, no_new_privs, securebits locked, no nested user namespaces, no real-time scheduling"},
		"filesystem": {State: LayerOn, Detail: "read-only root after pivot_root; tmpfs workspace and /tmp; minimal /dev; nothing of the host writable"},
	}
	if spec.Proxy {
		l["network"] = Layer{State: LayerOn, Detail: "only lo; egress through sbx's allowlist proxy"}
	} else {
		l["network"] = Layer{State: LayerOn, Detail: "only lo: no network"}
	}
	l["landlock"] = landlockLayer(spec, LandlockABI())
	switch {
	case spec.Seccomp == policyname.None:
		l["seccomp"] = Layer{State: LayerOff, Detail: "no syscall policy (seccomp.policy none); only the guard that keeps the payload from its init"}
	case exit != nil && exit.Filtered && !exit.DenialsKnown:
		l["seccomp"] = Layer{State: LayerDegraded, Detail: spec.Seccomp + " filter loaded; the kernel gave no listener, so denials are not reported"}
	default:
		l["seccomp"] = Layer{State: LayerOn, Detail: spec.Seccomp + " filter, denials reported"}
	}
	var weak, strong []string
	for _, k := range []string{"memory", "pids", "cpus", "cpu_time"} {
		li, ok := s.res.Limits[k]
		if !ok {
			continue
		}
		if li.EnforcedBy == ByCgroup1 || li.EnforcedBy == ByCgroup2 {
			strong = append(strong, k)
		} else {
			weak = append(weak, k+" by "+li.EnforcedBy)
		}
	}
	switch {
	case s.cg == nil && len(weak) == 0:
		l["cgroup"] = Layer{State: LayerOff, Detail: "no cgroup limit asked"}
	case len(weak) == 0:
		l["cgroup"] = Layer{State: LayerOn, Detail: fmt.Sprintf("%s: %s", s.res.Limits[strong[0]].EnforcedBy, strings.Join(strong, ", "))}
	default:
		sort.Strings(weak)
		l["cgroup"] = Layer{State: LayerDegraded, Detail: "limits without a cgroup: " + strings.Join(weak, ", ")}
	}
	s.res.Layers = l
}
