//go:build integration

package tests

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// serverLog is a started server's stderr as the test keeps it (a buffer
// safe for the reading goroutine), printed when the test fails.
type serverLog interface {
	io.Writer
	fmt.Stringer
}

// startListening starts cmd, an `sbx serve` (startServe, startOps,
// launch), and returns the address of its "sbx serve: listening on ADDR"
// line. Its stderr goes to log as well; exited receives cmd.Wait's error.
// It fails t if the server exits first, or does not listen within 30 s:
// it is then killed by pid and waited for.
func startListening(t *testing.T, cmd *exec.Cmd, log serverLog, exited chan error) string {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stderr = io.MultiWriter(pw, log)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { exited <- cmd.Wait(); pw.Close() }()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "sbx serve: listening on "); ok {
				addr <- strings.SplitN(a, ";", 2)[0]
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case a := <-addr:
		return a
	case err := <-exited:
		t.Fatalf("sbx serve exited before listening: %v\n%s", err, log)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("sbx serve did not listen within 30s:\n%s", log)
	}
	return ""
}
