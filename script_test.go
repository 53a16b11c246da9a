package main

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPipedScriptHasNoName: a script read from a pipe is held in a file
// with no name from the moment it is made, so that nothing of it outlives
// sbx (a signal ends sbx while it waits on the pipe), and it still reads
// whole for the #! line and the workspace.
func TestPipedScriptHasNoName(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	fifo := filepath.Join(tmp, "script.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo %s: %v", fifo, err)
	}
	const code = "#!/usr/bin/env python3\nprint('hi')\n"
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		w.Write([]byte(code[:10]))
		// The copy exists while sbx still waits for the rest: it must
		// have no name even then.
		time.Sleep(100 * time.Millisecond)
		if ents, _ := os.ReadDir(tmp); len(ents) != 1 {
			t.Errorf("while the script is read, TMPDIR holds %d entries, want only the fifo", len(ents))
		}
		w.Write([]byte(code[10:]))
	}()
	s := &script{maxBytes: 1 << 20, rootfs: "/"}
	name, err := s.readPipedScript(fifo)
	if err != nil {
		t.Fatal(err)
	}
	defer s.tmp.Close()
	if name != fifo {
		t.Errorf("source %q, want %q", name, fifo)
	}
	if _, err := os.Stat(s.tmp.Name()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the copy %s still has its name: %v", s.tmp.Name(), err)
	}
	got, err := io.ReadAll(io.NewSectionReader(s.tmp, 0, 1<<20))
	if err != nil || string(got) != code {
		t.Errorf("the copy holds %q (%v), want %q", got, err, code)
	}
	argv, err := s.interpreter(name, stdinScript)
	if err != nil || len(argv) != 2 || argv[0] != "python3" {
		t.Errorf("interpreter: %q, %v; want python3 %s", argv, err, stdinScript)
	}
}
