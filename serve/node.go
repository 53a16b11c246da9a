package serve

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sync"
)

// NodeHeader names the `sbx serve` that answered, on every response: the
// --node-name a load balancer's configuration knows the node by
// (docs/deploy.md). A client or an operator reading a response can tell
// which node ran it; the multi-node test counts on it.
const NodeHeader = "X-Sbx-Node"

// nodeNameRE (compiled on first use, not at every start of sbx and of
// every init: TestOwnPackageInitsAreLight) is what a node name may be: a DNS label or a hostname's
// characters, so it fits in a header, a session id's prefix and a load
// balancer's server name unquoted.
var nodeNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`) })

// NodeName checks --node-name; empty is the hostname (one sbx serve a
// host, the common case), with the characters a node name cannot hold
// replaced by '_'.
func NodeName(name string) (string, error) {
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("--node-name not given and uname's nodename unreadable: %w", err)
		}
		b := []byte(h)
		for i, c := range b {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				b[i] = '_'
			}
		}
		name = string(b)
		if len(name) > 63 {
			name = name[:63]
		}
	}
	if !nodeNameRE().MatchString(name) {
		return "", fmt.Errorf("--node-name %q: want 1 to 63 of A-Z a-z 0-9 . _ -, starting with a letter or digit", name)
	}
	return name, nil
}

// withNode sets NodeHeader on every response of h.
func withNode(node string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(NodeHeader, node)
		h.ServeHTTP(w, r)
	})
}

// NodeName is the node's name, checked (Config.NodeName or the hostname).
func (s *Server) NodeName() string { return s.cfg.NodeName }
