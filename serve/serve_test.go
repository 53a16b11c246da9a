package serve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAdmission(t *testing.T) {
	a := newAdmission(2, 1)
	for i := 0; i < 3; i++ {
		if err := a.enter(); err != nil {
			t.Fatalf("enter %d: %v", i, err)
		}
	}
	if err := a.enter(); !errors.Is(err, errFull) {
		t.Fatalf("4th enter: %v, want errFull", err)
	}
	if !a.full() {
		t.Error("not full with 2 running + 1 waiting")
	}
	ctx := context.Background()
	a.acquire(ctx)
	a.acquire(ctx)
	// The third waits for a worker, and gives up with its context.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := a.acquire(cctx); err == nil {
		t.Fatal("a third worker with max 2")
	}
	if a.running() != 2 || a.waiting() != 1 {
		t.Errorf("running %d waiting %d", a.running(), a.waiting())
	}
	a.leave(false)
	idle := a.close()
	if err := a.enter(); !errors.Is(err, errDraining) {
		t.Errorf("enter after close: %v", err)
	}
	select {
	case <-idle:
		t.Fatal("idle with two running")
	default:
	}
	a.leave(true)
	a.leave(true)
	select {
	case <-idle:
	case <-time.After(time.Second):
		t.Fatal("not idle once all left")
	}
}

// Many goroutines enter and leave at once: the count stays right (go
// test -race checks the locking).
func TestAdmissionConcurrent(t *testing.T) {
	a := newAdmission(3, 2)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if a.enter() != nil {
				return
			}
			ran := a.acquire(context.Background()) == nil
			a.running()
			a.waiting()
			a.leave(ran)
		}()
	}
	wg.Wait()
	if a.running() != 0 || a.waiting() != 0 || a.full() {
		t.Errorf("after all left: running %d waiting %d", a.running(), a.waiting())
	}
}

func TestCompleteUTF8(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"abc", 3}, {"", 0}, {"é", 2}, {"a\xc3", 1}, {"a\xe2\x82", 1}, {"\xe2\x82\xac", 3}, {"a\xf0\x9f\x98", 1}, {"\xff", 1},
	} {
		if got := completeUTF8([]byte(tc.in)); got != tc.want {
			t.Errorf("completeUTF8(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestReadTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(body string, mode os.FileMode) string {
		p := filepath.Join(dir, "tokens")
		os.Remove(p)
		os.WriteFile(p, []byte(body), mode)
		return p
	}
	toks, err := ReadTokens(write("# comment\nagent:0123456789abcdef\n\n0123456789abcdefXX\n", 0o600))
	if err != nil || len(toks) != 2 || toks[0] != (Token{"agent", "0123456789abcdef"}) || toks[1].Name != "token-4" {
		t.Fatalf("%+v %v", toks, err)
	}
	for body, want := range map[string]string{
		"a:short\n": "use at least 16",
		"":          "no token",
		"a:0123456789abcdef\na:0123456789abcdefgh\n": "already on line 1",
		":0123456789abcdef\n":                        "want NAME:TOKEN",
	} {
		if _, err := ReadTokens(write(body, 0o600)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
	if _, err := ReadTokens(write("a:0123456789abcdef\n", 0o644)); err == nil || !strings.Contains(err.Error(), "chmod 0600") {
		t.Errorf("world-readable: %v", err)
	}
}

func TestListenRefusesOpenTCPWithoutToken(t *testing.T) {
	if _, err := Listen("0.0.0.0:0", false); err == nil || !strings.Contains(err.Error(), "not a loopback address, and no token") {
		t.Errorf("0.0.0.0 without a token: %v", err)
	}
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err = Listen("unix:"+sock, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode: %v %v", fi.Mode(), err)
	}
	if _, err := Listen("unix:"+sock, false); err == nil || !strings.Contains(err.Error(), "another server") {
		t.Errorf("second listener on the socket: %v", err)
	}
}

func TestRequestCheck(t *testing.T) {
	code := "print(1)"
	for _, tc := range []struct {
		req  ExecRequest
		want string
	}{
		{ExecRequest{}, "nothing to run"},
		{ExecRequest{Code: &code, Argv: []string{"x"}}, "give one of them"},
		{ExecRequest{Argv: []string{""}}, "argv[0]"},
		{ExecRequest{Code: &code, Files: []InputFile{{Path: "main.py"}}}, "the code goes there"},
		{ExecRequest{Argv: []string{"x"}, Files: []InputFile{{Path: "a"}, {Path: "a"}}}, "given twice"},
		{ExecRequest{Argv: []string{"x"}, Files: []InputFile{{Path: "/etc/x"}}}, "clean relative path"},
		{ExecRequest{Argv: []string{"x"}, Files: []InputFile{{Path: "a/../b"}}}, "clean relative path"},
		{ExecRequest{Argv: []string{"x"}, Files: []InputFile{{Path: "a", Mode: 0o4755}}}, "permission bits only"},
		{ExecRequest{Argv: []string{"x"}, Env: map[string]string{"A=B": "c"}}, `env "A=B"`},
		{ExecRequest{Argv: []string{"x"}, Metadata: []byte(`[1]`)}, "want a JSON object"},
		{ExecRequest{Argv: []string{"x"}, Files: make([]InputFile, 3)}, "files: 3 files, past the server's 2"},
	} {
		err := tc.req.check(2)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
	ok := ExecRequest{Code: &code, Metadata: []byte(`{"task":"t1"}`), Env: map[string]string{"A": "1"}}
	if err := ok.check(2); err != nil {
		t.Errorf("a good request: %v", err)
	}
}
