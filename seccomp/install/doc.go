// Package install is the part of sbx's seccomp support that runs in the
// sandbox's init: the compiled Filter as plain data, Load (seccomp(2)
// SECCOMP_SET_MODE_FILTER on the calling thread) and Serve (the
// user-notification listener's answers). It has no cgo and imports only
// the standard library and golang.org/x/sys, so that the init binary
// (internal/initbin) links neither libseccomp nor glibc: compiling a
// policy (seccomp.Compile, libseccomp) is the supervisor's, and the init
// only installs the BPF it is sent (issue 13).
//
// Data, DecodeBPF and RunBPF are the user-space evaluator that
// seccomp.Compile checks libseccomp's output with; they live here because
// Load and Serve read the same struct sock_filter and struct seccomp_data.
package install
