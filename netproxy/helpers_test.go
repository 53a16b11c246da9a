package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startProxy serves a new Proxy on 127.0.0.1 and, at cleanup, closes it and
// checks that Serve returned nil and that no goroutine of the package is
// left: Close must have waited for all of them.
func startProxy(t *testing.T, c Config) (*Proxy, string) {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(l) }()
	t.Cleanup(func() {
		p.Close()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve returned %v, want nil after Close", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
		checkNoGoroutines(t)
		if s := socketsOn(t, portOf(t, l.Addr().String()), 0); len(s) > 0 {
			t.Errorf("sockets on the proxy port left after Close: %v", s)
		}
	})
	return p, l.Addr().String()
}

// checkNoGoroutines checks, right after Close, that every goroutine of the
// package is on its way out: in or past the final wg.Done that released
// Close (the last statement of finish, and of Serve's deferred func). Then
// it waits up to a second for those to be gone. A goroutine with no frame
// of ours left (only runtime.goexit1, "created by" one of ours) has
// returned from all of its code and is being torn down.
func checkNoGoroutines(t *testing.T) {
	t.Helper()
	for _, g := range proxyGoroutines() {
		if f := innermostOurs(g); f != "" && !strings.Contains(g, "sync.(*WaitGroup).Done") && !exitingFrame[f] {
			t.Errorf("goroutine still working in %s after Close returned:\n%s", f, g)
		}
	}
	deadline := time.Now().Add(time.Second)
	for {
		g := proxyGoroutines()
		if len(g) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines left after Close:\n%s", strings.Join(g, "\n\n"))
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// exitingFrame lists where a goroutine past its wg.Done can still be seen.
var exitingFrame = map[string]bool{
	"(*Proxy).finish": true, "(*session).end": true, "(*session).run": true,
	"(*Proxy).Serve.func1": true, "(*Proxy).Serve": true,
}

// innermostOurs returns the innermost function of the package's non-test
// code in a goroutine's stack, such as "(*session).run".
func innermostOurs(g string) string {
	lines := strings.Split(g, "\n")
	for i := 1; i+1 < len(lines); i++ {
		if ourFrame.MatchString(lines[i+1]) && !strings.HasPrefix(lines[i], "created by") {
			fn := lines[i]
			if j := strings.LastIndex(fn, "("); j > 0 && strings.HasSuffix(fn, ")") {
				fn = fn[:j] // drop the arguments
			}
			_, fn, _ = strings.Cut(fn, "/netproxy.")
			return fn
		}
	}
	return ""
}

// ourFrame matches a stack frame or creator in the package's non-test files.
var ourFrame = regexp.MustCompile(`/netproxy/[a-z]+\.go:\d+`)

// proxyGoroutines returns the stacks of live goroutines that run, or were
// started by, code of this package outside its tests.
func proxyGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var ours []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if ourFrame.MatchString(g) {
			ours = append(ours, g)
		}
	}
	return ours
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// socketsOn lists this process's open TCP sockets whose local port is
// local, or whose remote port is remote (0: do not match), read from
// /proc/self/fd and /proc/net/tcp{,6}.
func socketsOn(t *testing.T, local, remote int) []string {
	t.Helper()
	inodes := map[string]string{} // inode -> "local -> remote"
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 {
				continue
			}
			lp := hexPort(fs[1])
			rp := hexPort(fs[2])
			if lp == local || (remote != 0 && rp == remote) {
				inodes[fs[9]] = fmt.Sprintf("%d -> %d (state %s)", lp, rp, fs[3])
			}
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, fd := range fds {
		link, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok {
			if desc, ok := inodes[strings.TrimSuffix(ino, "]")]; ok {
				out = append(out, "fd "+fd.Name()+": "+desc)
			}
		}
	}
	return out
}

func hexPort(addr string) int {
	_, p, _ := strings.Cut(addr, ":")
	n, _ := strconv.ParseInt(p, 16, 32)
	return int(n)
}

// exchange sends raw bytes to the proxy and reads one response.
func exchange(t *testing.T, proxy, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", firstLine(raw), err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body of the response to %q: %v", firstLine(raw), err)
	}
	return resp, string(b)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\r\n")
	return l
}

// waitAttempts waits until n attempts have ended and returns them.
func waitAttempts(t *testing.T, p *Proxy, n int) []Attempt {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a := p.Attempts()
		if len(a) >= n {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts recorded, want %d: %+v", len(a), n, a)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitActive waits until the proxy runs n sessions.
func waitActive(t *testing.T, p *Proxy, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		a := p.active
		p.mu.Unlock()
		if a == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions active, want %d", a, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tcpServer runs handle for every connection on a 127.0.0.1 listener until
// the test ends, and waits for the handlers then.
func tcpServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

func echoServer(t *testing.T) string {
	return tcpServer(t, func(c net.Conn) { io.Copy(c, c) })
}

// closedPort returns a 127.0.0.1 port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := portOf(t, l.Addr().String())
	l.Close()
	return port
}

// lastAttempt returns the only attempt that matches host and method.
func findAttempt(t *testing.T, as []Attempt, method, host string) Attempt {
	t.Helper()
	var found []Attempt
	for _, a := range as {
		if a.Method == method && a.Host == host {
			found = append(found, a)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d attempts %s %s, want 1 in %+v", len(found), method, host, as)
	}
	return found[0]
}
