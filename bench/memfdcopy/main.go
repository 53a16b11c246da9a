// Command memfdcopy measures what each `sbx exec` pays to put sbx-init
// in a sealed memfd (internal/initbin): memfd_create, the copy (sendfile
// from the file, or write from memory as the embedded image is), and
// F_ADD_SEALS, then close. It takes images to compare and runs them
// interleaved (A B A B ...), printing the medians of the thread's CPU
// (CLOCK_THREAD_CPUTIME_ID) and the wall per copy:
//
//	go run ./bench/memfdcopy 300 old/sbx-init.bin internal/initbin/sbx-init.bin
//
// docs/DESIGN.md ("The init's image") quotes it.
package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

const seals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		fatal(fmt.Errorf("clock_gettime(CLOCK_THREAD_CPUTIME_ID): %w", err))
	}
	return time.Duration(ts.Nano())
}

// copyOnce makes one sealed memfd of the image at path (img: its bytes)
// and closes it: its CPU and wall.
func copyOnce(path string, img []byte, sendfile bool) (cpu, wall time.Duration) {
	c0, w0 := threadCPU(), time.Now()
	fd, err := unix.MemfdCreate("memfdcopy", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		fatal(fmt.Errorf("memfd_create(MFD_CLOEXEC|MFD_ALLOW_SEALING): %w", err))
	}
	if sendfile {
		src, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			fatal(fmt.Errorf("open %s: %w", path, err))
		}
		var off int64
		for left := len(img); left > 0; {
			n, err := unix.Sendfile(fd, src, &off, left)
			if err != nil || n == 0 {
				fatal(fmt.Errorf("sendfile %s to the memfd at %d: %v", path, off, err))
			}
			left -= n
		}
		unix.Close(src)
	} else {
		for b := img; len(b) > 0; {
			n, err := unix.Write(fd, b)
			if err != nil {
				fatal(fmt.Errorf("write to the memfd: %w", err))
			}
			b = b[n:]
		}
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		fatal(fmt.Errorf("fcntl(F_ADD_SEALS): %w", err))
	}
	unix.Close(fd)
	return threadCPU() - c0, time.Since(w0)
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "memfdcopy:", err)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 3 {
		fatal(fmt.Errorf("usage: memfdcopy ROUNDS IMAGE..."))
	}
	rounds, err := strconv.Atoi(os.Args[1])
	if err != nil || rounds < 1 {
		fatal(fmt.Errorf("rounds %q: want a positive number", os.Args[1]))
	}
	// One thread: CLOCK_THREAD_CPUTIME_ID must be the copying thread's.
	runtime.LockOSThread()
	paths := os.Args[2:]
	imgs := make([][]byte, len(paths))
	for i, p := range paths {
		if imgs[i], err = os.ReadFile(p); err != nil {
			fatal(err)
		}
	}
	for _, sendfile := range []bool{true, false} {
		cpus := make([][]time.Duration, len(paths))
		walls := make([][]time.Duration, len(paths))
		for range rounds {
			for i := range paths {
				c, w := copyOnce(paths[i], imgs[i], sendfile)
				cpus[i], walls[i] = append(cpus[i], c), append(walls[i], w)
			}
		}
		how := "write"
		if sendfile {
			how = "sendfile"
		}
		for i, p := range paths {
			fmt.Printf("%-8s %s: %d bytes, CPU %v, wall %v (medians of %d)\n", how, p, len(imgs[i]), median(cpus[i]), median(walls[i]), rounds)
		}
	}
}
