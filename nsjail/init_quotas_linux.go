package nsjail

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// userNSQuotaSteps are the init's steps that set userNSQuotas, one per
// file, each named after the sysctl it writes.
func userNSQuotaSteps() []step {
	steps := make([]step, len(userNSQuotas))
	for i, q := range userNSQuotas {
		steps[i] = step{fmt.Sprintf("user.%s=%d", q.name, q.value), func() error { return setUserNSQuota(q) }}
	}
	return steps
}

// setUserNSQuota writes one limit of the sandbox's user namespace (the
// /proc/sys/user files are per user namespace: each namespace sees and
// sets its own; kernel/ucount.c, set_lookup). Fails closed, but for an
// optional quota the kernel does not have.
func setUserNSQuota(q userNSQuota) error {
	path := "/proc/sys/user/" + q.name
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) && q.optional {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	v := strconv.FormatInt(q.value, 10)
	if _, err := unix.Write(fd, []byte(v+"\n")); err != nil {
		return fmt.Errorf("write %s to %s: %w", v, path, err)
	}
	return nil
}
