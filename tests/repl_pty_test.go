//go:build integration

package tests

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPty opens a pseudo-terminal pair (pty(7): posix_openpt, unlockpt,
// ptsname, with golang.org/x/sys's ioctls), both ends close-on-exec.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("open /dev/ptmx: %v (no devpts on this host)", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("ioctl(TIOCSPTLCK, 0): %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("ioctl(TIOCGPTN): %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open /dev/pts/%d: %v", n, err)
	}
	return m, s
}

// ptyScreen is what the terminal showed so far.
type ptyScreen struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (p *ptyScreen) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

// waitFor waits until the screen after from holds want (generously: the
// machine is loaded), and returns where it ends.
func (p *ptyScreen) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := p.String()
		if i := strings.Index(s[from:], want); i >= 0 {
			return from + i + len(want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q after byte %d; it shows:\n%q", want, from, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplTerminal drives `sbx repl` through a pty as a person would:
// line editing and history (Up recalls the line before), a multi-line
// cell, Ctrl-C while a cell runs (KeyboardInterrupt, the state kept) and
// at the prompt (the lines typed dropped), Ctrl-D to end.
func TestReplTerminal(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		master, slave := openPty(t)
		defer master.Close()
		cmd := r.command("repl", "--profile", "strict")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		// Its own session, the pty its controlling terminal, so that
		// Ctrl-C is the terminal's SIGINT to it (termios(3), ISIG).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		defer func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
			}
		}()
		screen := &ptyScreen{}
		go func() {
			b := make([]byte, 4096)
			for {
				n, err := master.Read(b)
				screen.mu.Lock()
				screen.buf.Write(b[:n])
				screen.mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
		send := func(s string) {
			if _, err := master.Write([]byte(s)); err != nil {
				t.Fatalf("write the pty: %v", err)
			}
		}
		at := screen.waitFor(t, 0, ">>> ")
		send("x = 41\r")
		at = screen.waitFor(t, at, ">>> ")
		// Line editing: Left twice and an insert make "x + 1" of "x 1".
		send("x 1\x1b[D\x1b[D +\r")
		at = screen.waitFor(t, at, "42\r\n>>> ")
		// Up recalls "x + 1"; Up again "x = 41"; Down back to "x + 1",
		// edited at its end (Ctrl-E) to "x + 100".
		send("\x1b[A\r")
		at = screen.waitFor(t, at, "42\r\n>>> ")
		send("\x1b[A\x1b[A\x1b[B\x0500\r")
		at = screen.waitFor(t, at, "141\r\n>>> ")
		// A block: a header, its body, an empty line.
		send("for i in range(2):\r")
		at = screen.waitFor(t, at, "... ")
		send("    print(i * 10)\r")
		at = screen.waitFor(t, at, "... ")
		send("\r")
		at = screen.waitFor(t, at, "0\r\n10\r\n>>> ")
		// Ctrl-C while a cell runs: KeyboardInterrupt, the state kept.
		send("import time; print('sleeping', flush=True); time.sleep(120)\r")
		at = screen.waitFor(t, at, "sleeping\r\n")
		send("\x03")
		at = screen.waitFor(t, at, "KeyboardInterrupt")
		at = screen.waitFor(t, at, ">>> ")
		send("x\r")
		at = screen.waitFor(t, at, "41\r\n>>> ")
		// Ctrl-C at the prompt drops the block typed so far.
		send("if True:\r")
		at = screen.waitFor(t, at, "... ")
		send("\x03")
		at = screen.waitFor(t, at, "KeyboardInterrupt\r\n>>> ")
		send("x - 1\r")
		at = screen.waitFor(t, at, "40\r\n>>> ")
		// Ctrl-D ends it.
		send("\x04")
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("sbx repl after Ctrl-D: %v\n%q", err, screen.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("sbx repl did not end after Ctrl-D:\n%q", screen.String())
		}
	})
}
