package spec

import "strings"

// LayerState is what one layer of the sandbox was during a run: the
// Result's layers.*.state.
type LayerState string

// Layer states in the Result's layers.
const (
	LayerOn       LayerState = "on"
	LayerDegraded LayerState = "degraded" // in place, but weaker than asked (e.g. rlimits for a cgroup)
	LayerOff      LayerState = "off"      // turned off by the profile
)

// Layer says what one layer of the sandbox was during a run.
type Layer struct {
	State  LayerState `json:"state"`
	Detail string     `json:"detail"`
	// ABI is the Landlock ABI of the landlock layer (0: none).
	ABI int `json:"abi,omitempty"`
}

// DegradedSummary is the one line a terminal user sees when a layer was
// weaker than asked or off; "" when none was.
func (r *Result) DegradedSummary() string {
	var parts []string
	for _, k := range []string{"cgroup", "seccomp", "landlock"} {
		if l, ok := r.Layers[k]; ok && (l.State == LayerDegraded || l.State == LayerOff && k == "seccomp") {
			parts = append(parts, k+": "+l.Detail)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "weaker sandbox: " + strings.Join(parts, "; ") + " (sbx doctor says why and how to fix it)"
}
