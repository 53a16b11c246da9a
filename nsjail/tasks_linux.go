package nsjail

import (
	"bytes"
	"os"
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
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(taskCountMax + 64)
	n, read := 0, 0
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' || read >= taskCountMax {
			continue
		}
		read++
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // reaped since the listing
		}
		n += max(statThreads(b), 1)
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
