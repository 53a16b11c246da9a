package serve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
)

// unixPrefix marks a unix socket address: unix:/run/sbx.sock.
const unixPrefix = "unix:"

// Listen opens addr: host:port on TCP, or unix:/path, a socket of mode
// 0660 (its group may connect, others not). A stale socket at path (one
// nothing listens on) is replaced; any other file there is an error.
// tokens says whether bearer tokens are configured: a TCP address other
// than loopback without them is refused, since anyone who can reach it
// could run code on this host.
func Listen(addr string, tokens bool) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, unixPrefix); ok {
		return listenUnix(path)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: want HOST:PORT or unix:/PATH (%v)", addr, err)
	}
	if !tokens && !isLoopback(host) {
		return nil, fmt.Errorf("--listen %s: not a loopback address, and no token: give --token-file FILE or SBX_TOKEN (anyone who can reach %s could run code here)", addr, host)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	return ln, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func listenUnix(path string) (net.Listener, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("--listen unix:%s: want an absolute path", path)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("--listen unix:%s: a file that is not a socket is there", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("--listen unix:%s: another server listens there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("--listen unix:%s: remove the stale socket: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("--listen unix:%s: %w", path, err)
	}
	// chmod after bind: the window in between is closed by the umask of
	// the directory's owner at worst; 0660 lets the socket's group in.
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("--listen unix:%s: chmod 0660: %w", path, err)
	}
	return ln, nil
}

// ReadTokens reads a token file: one token a line, "NAME:TOKEN" (the
// name is what the audit log records) or a bare TOKEN (named "token-N",
// N its line); blank lines and lines starting with # are skipped. The
// file must not be readable by others than its owner and group (mode
// 0640 or less), as ssh insists for its keys.
func ReadTokens(path string) ([]Token, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--token-file %s: %w", path, unwrapPath(err))
	}
	if fi.Mode().Perm()&0o007 != 0 {
		return nil, fmt.Errorf("--token-file %s: mode %#o lets any user read the tokens: chmod 0600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--token-file %s: %w", path, unwrapPath(err))
	}
	var out []Token
	names := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, secret, ok := strings.Cut(line, ":")
		if !ok {
			name, secret = fmt.Sprintf("token-%d", n), line
		}
		name, secret = strings.TrimSpace(name), strings.TrimSpace(secret)
		switch {
		case name == "" || secret == "":
			return nil, fmt.Errorf("--token-file %s: line %d: want NAME:TOKEN or TOKEN", path, n)
		case len(secret) < 16:
			return nil, fmt.Errorf("--token-file %s: line %d: token %s is %d characters; use at least 16 (e.g. openssl rand -hex 32)", path, n, name, len(secret))
		case names[name] != 0:
			return nil, fmt.Errorf("--token-file %s: line %d: name %s already on line %d", path, n, name, names[name])
		}
		names[name] = n
		out = append(out, Token{Name: name, Secret: secret})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--token-file %s: no token in it", path)
	}
	return out, nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
