package seccomp

import (
	"fmt"

	"github.com/sbx-sandbox/sbx/seccomp/internal/rawabi"
)

// foreignABICall makes a syscall through another ABI of the machine and
// says what happened, if the process survives it.
func foreignABICall(abi string) string {
	switch abi {
	case "int80":
		r := rawabi.Int80(rawabi.I386Getpid, 0, 0, 0)
		return fmt.Sprintf("survived: %d", int64(r))
	case "x32":
		_, e := rawabi.X32Getpid()
		return "survived: " + resultOf(errnoErr(e))
	}
	return "unknown ABI " + abi
}
