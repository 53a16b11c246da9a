//go:build !amd64

package seccomp

// foreignABICall: int 0x80 and x32 are x86_64's; TestKernelOtherABIsKill
// skips elsewhere.
func foreignABICall(abi string) string { return "no " + abi + " on this architecture" }
