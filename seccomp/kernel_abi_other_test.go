//go:build !amd64

package seccomp

// int80Fault: see kernel_abi_amd64_test.go.
const int80Fault = "fault: no int 0x80 (IA32 emulation off)"

// foreignABICall: int 0x80 and x32 are x86_64's; TestKernelOtherABIsKill
// skips elsewhere.
func foreignABICall(abi string) string { return "no " + abi + " on this architecture" }
