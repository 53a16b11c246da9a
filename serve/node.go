package serve

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
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
	// A session's sandbox cgroup is "sbx-" + its id, and the id starts
	// with the node name; "sbx-supervisor-" is sbx's own leaf cgroup
	// (cgroup/layout.go), which cgroup.New refuses as a sandbox's.
	if strings.HasPrefix(name, reservedNodePrefix) {
		return "", fmt.Errorf("--node-name %q: %q is reserved (a session's cgroup would be named as sbx's own leaf cgroup)", name, reservedNodePrefix)
	}
	return name, nil
}

const reservedNodePrefix = "supervisor-"

// Session ids name the node that holds the session, so that a load
// balancer can send every request for it there (deploy/haproxy/sbx.cfg,
// deploy/nginx/sbx.conf): NODE "-" HEX, HEX the 24 lowercase hex digits
// of newID. A node name may itself hold '-' (sbx-1, a Kubernetes pod's
// name), so the id parses from its end: the node is everything before
// the last '-', which HEX never holds. "sbx-1-2-" + HEX is node sbx-1-2,
// never sbx-1: a load balancer's rule must match the whole id (the
// configurations anchor HEX), not the prefix "sbx-1-" alone.
const sessionHexLen = 24

// sessionID is a new id for a session of node.
func sessionID(node string) string { return node + "-" + newID() }

// sessionNode is the node a session id names; ok is false when id is not
// of the form at all (then no node can hold it: 404).
func sessionNode(id string) (node string, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 || len(id)-i-1 != sessionHexLen {
		return "", false
	}
	for _, c := range id[i+1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	node = id[:i]
	return node, nodeNameRE().MatchString(node)
}

// MisdirectedError is the body of a 421: the error of every answer
// (code "misdirected") and the two nodes, for a client or an operator
// to tell a load balancer's misroute from a lost session.
type MisdirectedError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		// Node holds the session (the id's prefix); ThisNode answered.
		Node     string `json:"node"`
		ThisNode string `json:"this_node"`
	} `json:"error"`
}

// writeMisdirected answers a request for session id, which node holds,
// received by this node: 421 Misdirected Request, "the request was
// directed at a server that is unable or unwilling to produce an
// authoritative response for the target URI" (RFC 9110 15.5.20). Not
// 404: the session may well exist, on node; 404 stays for this node's
// sessions that do not (expired, deleted, lost in a restart).
// X-Sbx-Session-Route names node, where the request belongs.
func (s *Server) writeMisdirected(w http.ResponseWriter, id, node string) {
	var e MisdirectedError
	e.Error.Code, e.Error.Node, e.Error.ThisNode = "misdirected", node, s.cfg.NodeName
	e.Error.Message = fmt.Sprintf("session %s lives on node %s, not on this node %s: the load balancer must send it to %s (by the id's prefix or %s; docs/deploy.md), or %s is down", id, node, s.cfg.NodeName, node, SessionRouteHeader, node)
	w.Header().Set(SessionRouteHeader, node)
	writeJSON(w, http.StatusMisdirectedRequest, e)
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
