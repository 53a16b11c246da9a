package nsjail

import "github.com/sbx-sandbox/sbx/seccomp/install"

// Confine is the second message on the control pipe: what the init loads
// just before the payload starts.
type Confine struct {
	Seccomp *install.Filter `json:"seccomp"`
	// Rlimits that depend on the cgroup (its fallbacks, the RLIMIT_CPU
	// backstop), decided while the init set up.
	Rlimits []Rlimit `json:"rlimits,omitempty"`
}
