package netproxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// socksDial runs a SOCKS5 handshake by hand (RFC 1928) and returns the
// connection, the method the server chose and the reply code (0xff when
// no request was sent).
func socksDial(t *testing.T, proxy string, methods []byte, cmd, atyp byte, addr []byte, port uint16) (net.Conn, byte, byte) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write(append([]byte{5, byte(len(methods))}, methods...))
	var sel [2]byte
	if _, err := io.ReadFull(c, sel[:]); err != nil {
		t.Fatalf("method selection: %v", err)
	}
	if sel[0] != 5 {
		t.Fatalf("method selection version %d", sel[0])
	}
	if sel[1] == 0xff {
		return c, sel[1], 0xff
	}
	req := []byte{5, cmd, 0, atyp}
	if atyp == 3 {
		req = append(req, byte(len(addr)))
	}
	req = append(req, addr...)
	req = binary.BigEndian.AppendUint16(req, port)
	c.Write(req)
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatalf("reply: %v", err)
	}
	if rep[0] != 5 || rep[3] != 1 || !bytes.Equal(rep[4:], make([]byte, 6)) {
		t.Errorf("reply %v: want version 5 and a zero IPv4 bound address", rep)
	}
	return c, sel[1], rep[1]
}

func TestSOCKS5(t *testing.T) {
	be := newBackend(t, echoHandler)
	bePort := uint16(portOf(t, be.addr()))
	closed := closedPort(t)
	p, addr := startProxy(t, Config{
		Allow:   []string{"api.test", "down.test"},
		Resolve: map[string]string{"api.test": be.addr(), "down.test": fmt.Sprintf("127.0.0.1:%d", closed)},
	})

	t.Run("allowed name", func(t *testing.T) {
		c, m, rep := socksDial(t, addr, []byte{2, 0}, 1, 3, []byte("API.test"), 80)
		if m != 0 || rep != 0 {
			t.Fatalf("method %d, reply %d", m, rep)
		}
		io.WriteString(c, "GET /socks HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "GET /socks host=api.test") {
			t.Errorf("through the tunnel: %d %q", resp.StatusCode, b)
		}
	})
	if a := waitAttempts(t, p, 1)[0]; !a.Allowed || a.Host != "api.test" || a.Port != 80 || a.Addr != be.addr() || a.BytesDown == 0 {
		t.Errorf("attempt = %+v", a)
	}
	for _, tc := range []struct {
		name    string
		methods []byte
		cmd     byte
		atyp    byte
		addr    []byte
		port    uint16
		rep     byte
		host    string
		reason  string
	}{
		{"name not listed", []byte{0}, 1, 3, []byte("evil.test"), 443, 2, "evil.test", "evil.test:443 is not on the allowlist"},
		{"loopback IPv4", []byte{0}, 1, 1, []byte{127, 0, 0, 1}, bePort, 2, "127.0.0.1", "loopback"},
		{"metadata IPv4", []byte{0}, 1, 1, []byte{169, 254, 169, 254}, 80, 2, "169.254.169.254", "link-local"},
		{"loopback IPv6", []byte{0}, 1, 4, netip.IPv6Loopback().AsSlice(), 80, 2, "::1", "loopback (::1"},
		{"mapped IPv6", []byte{0}, 1, 4, netip.MustParseAddr("::ffff:127.0.0.1").AsSlice(), 80, 2, "127.0.0.1", "loopback"},
		{"literal as a name", []byte{0}, 1, 3, []byte("127.0.0.1"), bePort, 2, "127.0.0.1", "loopback"},
		{"numeric name", []byte{0}, 1, 3, []byte("2130706433"), 80, 1, "", "dotted-quad"},
		{"BIND", []byte{0}, 2, 3, []byte("api.test"), 80, 7, "api.test", "command 2 is not supported"},
		{"UDP ASSOCIATE", []byte{0}, 3, 1, []byte{0, 0, 0, 0}, 0, 7, "0.0.0.0", "command 3 is not supported"},
		{"address type", []byte{0}, 1, 9, nil, 80, 8, "", "address type 9"},
		{"port 0", []byte{0}, 1, 3, []byte("api.test"), 0, 1, "api.test", "port 0"},
		{"no acceptable method", []byte{1, 2}, 1, 3, []byte("api.test"), 80, 0xff, "", "no method without authentication"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(p.Attempts())
			_, _, rep := socksDial(t, addr, tc.methods, tc.cmd, tc.atyp, tc.addr, tc.port)
			if rep != tc.rep {
				t.Errorf("reply %d, want %d", rep, tc.rep)
			}
			a := waitAttempts(t, p, n+1)[n]
			if a.Allowed || a.Method != "SOCKS5" || a.Host != tc.host || !strings.Contains(a.Reason, tc.reason) || a.Addr != "" {
				t.Errorf("attempt = %+v", a)
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		n := len(p.Attempts())
		if _, _, rep := socksDial(t, addr, []byte{0}, 1, 3, []byte("down.test"), 80); rep != 5 {
			t.Errorf("reply %d, want 5 (connection refused)", rep)
		}
		if a := waitAttempts(t, p, n+1)[n]; !a.Allowed || !strings.Contains(a.Error, "refused") {
			t.Errorf("attempt = %+v", a)
		}
	})
	if h := be.hits.Load(); h != 1 {
		t.Errorf("destination hit %d times, want 1", h)
	}
}

// The header timeout covers the SOCKS5 handshake too. It is 1 s: the
// greeting must be read within it, and at 200 ms a loaded machine once
// took longer to get there, which ended the run on the header timeout
// before the handshake began.
func TestSOCKS5Slow(t *testing.T) {
	p, addr := startProxy(t, Config{HeaderTimeout: time.Second})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte{5, 1, 0})
	var sel [2]byte
	if _, err := io.ReadFull(c, sel[:]); err != nil || sel != [2]byte{5, 0} {
		t.Fatalf("method selection %v, %v; want [5 0]", sel, err)
	}
	c.Write([]byte{5, 1}) // and never the rest of the request
	start := time.Now()
	_, err = io.ReadAll(c)
	if el := time.Since(start); isTimeout(err) || el > 5*time.Second {
		t.Errorf("half a request kept the connection for %v (%v)", el, err)
	}
	if a := waitAttempts(t, p, 1)[0]; !strings.Contains(a.Reason, "SOCKS5 handshake not complete within the header timeout") {
		t.Errorf("attempt = %+v", a)
	}
}
