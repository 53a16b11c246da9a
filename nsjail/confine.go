package nsjail

import "github.com/sbx-sandbox/sbx/seccomp/install"

// Confine is the second message on the control pipe: what the init loads
// just before the payload starts.
type Confine struct {
	Seccomp *install.Filter `json:"seccomp"`
	// Rlimits that depend on the cgroup (its fallbacks, the RLIMIT_CPU
	// backstop), decided while the init set up.
	Rlimits []Rlimit `json:"rlimits,omitempty"`
	// BPFBytes and FallbackBytes are the sizes of Seccomp's two
	// programs (BPF, Fallback), which cross raw right after the
	// Confine's line, never in it (wire.go, the programs' frame).
	// encodeCtl sets them.
	BPFBytes      int `json:"bpf_bytes,omitempty"`
	FallbackBytes int `json:"fallback_bytes,omitempty"`
}
