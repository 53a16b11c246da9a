package nsjail

import (
	"bytes"
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// taskCountMax caps the processes countTasks reads, so that the count at
// the payload's end stays a few milliseconds whatever the payload left
// behind; past it the count is a lower bound, which is all the pids
// evidence needs (a count at or past the limit).
const taskCountMax = 4096

// countTasks counts the tasks of the init's pid namespace, threads and
// zombies included, from its own procfs: for each /proc/PID, the
// num_threads of its stat line (field 20, proc(5)), and at least one. It is
// what RLIMIT_NPROC counts in the sandbox: every task of its user
// namespace with the sandbox's one uid (the single id map makes the init
// and the payload the same uid; ucounts, Linux 5.14), counted from fork
// until release, zombies too (kernel/fork.c copy_process,
// kernel/exit.c release_task). The init calls it when the payload ended,
// before it kills what is left (issue 19, point 1): the one moment a fork
// bomb's tree is whole and still there to count.
func countTasks() int {
	// Plain openat, getdents64, read and close, the calls the init keeps
	// under its payload's filter (postConfineSyscalls): os.Open would
	// also try epoll_ctl, which a filter might refuse and count as the
	// payload's denial.
	d, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(d)
	var dents [8192]byte
	var stat [1024]byte
	n, read := 0, 0
	for read < taskCountMax {
		nb, err := unix.Getdents(d, dents[:])
		if err != nil || nb <= 0 {
			break
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8,
		// then the NUL-terminated name (getdents64(2)).
		for off := 0; off+19 < nb && read < taskCountMax; {
			reclen := int(binary.NativeEndian.Uint16(dents[off+16:]))
			if reclen == 0 {
				break
			}
			name := dents[off+19 : off+reclen]
			off += reclen
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if _, ok := parseInt(name); !ok {
				continue
			}
			read++
			fd, err := unix.Open("/proc/"+string(name)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				continue // reaped since the listing
			}
			k, err := unix.Read(fd, stat[:])
			unix.Close(fd)
			if err != nil || k <= 0 {
				continue
			}
			n += max(statThreads(stat[:k]), 1)
		}
	}
	return n
}

// statThreads is field 20 (num_threads) of a /proc/PID/stat line, or 0.
// The command name, field 2, is the payload's choice and may hold spaces
// and parentheses: fields are counted from the last ')'.
func statThreads(b []byte) int {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state): field 20 is f[17].
	if len(f) < 18 {
		return 0
	}
	v, ok := parseInt(f[17])
	if !ok {
		return 0
	}
	return int(v)
}
