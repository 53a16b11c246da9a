package seccomp

import (
	"fmt"
	"runtime/debug"

	"github.com/sbx-sandbox/sbx/seccomp/internal/rawabi"
)

// foreignABICall makes a syscall through another ABI of the machine and
// says what happened, if the process survives it.
func foreignABICall(abi string) string {
	switch abi {
	case "int80":
		return int80()
	case "x32":
		_, e := rawabi.X32Getpid()
		return "survived: " + resultOf(errnoErr(e))
	}
	return "unknown ABI " + abi
}

// int80 makes i386's getpid with int 0x80. A kernel without IA32
// emulation (CONFIG_IA32_EMULATION off, or ia32_emulation=0 on its
// command line, Linux 6.7+) installs no gate for the vector: the
// instruction faults (#GP, SIGSEGV with SI_KERNEL) before any syscall
// entry, so before any seccomp filter. SetPanicOnFault makes that fault a
// panic this function recovers from, instead of the runtime's throw.
func int80() (res string) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			res = int80Fault
		}
	}()
	r := rawabi.Int80(rawabi.I386Getpid, 0, 0, 0)
	return fmt.Sprintf("survived: %d", int64(r))
}
