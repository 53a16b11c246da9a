package seccomp

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNewerSyscallTable holds sbx's table of syscalls newer than libseccomp
// to x/sys/unix's numbers.
func TestNewerSyscallTable(t *testing.T) {
	want := map[string]int{
		"futex_wait": unix.SYS_FUTEX_WAIT, "futex_requeue": unix.SYS_FUTEX_REQUEUE,
		"statmount": unix.SYS_STATMOUNT, "listmount": unix.SYS_LISTMOUNT,
		"lsm_get_self_attr": unix.SYS_LSM_GET_SELF_ATTR, "lsm_set_self_attr": unix.SYS_LSM_SET_SELF_ATTR,
		"lsm_list_modules": unix.SYS_LSM_LIST_MODULES, "mseal": unix.SYS_MSEAL,
		"setxattrat": unix.SYS_SETXATTRAT, "getxattrat": unix.SYS_GETXATTRAT,
		"listxattrat": unix.SYS_LISTXATTRAT, "removexattrat": unix.SYS_REMOVEXATTRAT,
		"open_tree_attr": unix.SYS_OPEN_TREE_ATTR, "file_getattr": unix.SYS_FILE_GETATTR,
		"file_setattr": unix.SYS_FILE_SETATTR, "listns": unix.SYS_LISTNS,
	}
	if len(want) != len(newerSyscalls) {
		t.Errorf("table has %d entries, test knows %d", len(newerSyscalls), len(want))
	}
	for name, nr := range want {
		if newerSyscalls[name] != nr {
			t.Errorf("%s: table says %d, x/sys says %d", name, newerSyscalls[name], nr)
		}
	}
	// x86-only and arm-only names are skipped, not errors.
	if _, err := SyscallNumber("socketcall"); !errors.Is(err, errNotNative) {
		t.Errorf("SyscallNumber(socketcall) = %v, want errNotNative", err)
	}
	if nr, err := SyscallNumber("arch_prctl"); err != nil || nr != unix.SYS_ARCH_PRCTL {
		t.Errorf("SyscallNumber(arch_prctl) = %d, %v", nr, err)
	}
}
