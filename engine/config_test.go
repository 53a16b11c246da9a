package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/audit"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
)

// flags is a Request.Flags from a map, as the CLI's would be.
func flags(m map[string][]string) func(string) ([]string, bool) {
	return func(name string) ([]string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func TestBuild(t *testing.T) {
	cases := []struct {
		name string
		req  Request
		// check looks at the Config; wantErr, if set, is in the error.
		check   func(t *testing.T, c *Config)
		wantErr string
	}{
		{name: "profile alone", req: Request{Profile: "strict"}, check: func(t *testing.T, c *Config) {
			want := HostLimits{Wall: 10 * time.Second, Output: 1 << 20}
			if c.Host.Wall != want.Wall || c.Host.Output != want.Output {
				t.Errorf("host = %+v, want wall %v output %d", c.Host, want.Wall, want.Output)
			}
			if c.Host.Cgroup.MemoryBytes != 256<<20 || c.Host.Cgroup.Pids != 64 || c.Proxy != nil || c.Spec.Profile != "strict" || c.Spec.ID != "id1" {
				t.Errorf("config = %+v", c)
			}
		}},
		{name: "default profile", req: Request{}, check: func(t *testing.T, c *Config) {
			if c.Profile.Name != profiles.DefaultName || c.Host.Wall != 120*time.Second {
				t.Errorf("profile %s, wall %v", c.Profile.Name, c.Host.Wall)
			}
		}},
		{name: "a flag may raise", req: Request{Profile: "strict", Flags: flags(map[string][]string{"memory": {"2G"}, "timeout": {"1m"}})}, check: func(t *testing.T, c *Config) {
			if c.Host.Cgroup.MemoryBytes != 2<<30 || c.Host.Wall != time.Minute {
				t.Errorf("memory %d wall %v", c.Host.Cgroup.MemoryBytes, c.Host.Wall)
			}
		}},
		{name: "a request may lower", req: Request{Profile: "standard", Lower: map[string]string{"memory": "256M", "wall_time": "5s", "pids": "10", "cpus": "0.5", "output": "1K"}}, check: func(t *testing.T, c *Config) {
			h := c.Host
			if h.Cgroup.MemoryBytes != 256<<20 || h.Wall != 5*time.Second || h.Cgroup.Pids != 10 || h.Cgroup.CPUs != 0.5 || h.Output != 1024 {
				t.Errorf("host = %+v", h)
			}
			if o := c.Profile.Origin("limits.memory"); o.Kind != profiles.FromRequest || o.String() != "request limits.memory" {
				t.Errorf("origin = %+v (%s)", o, o)
			}
		}},
		{name: "equal is not raising", req: Request{Profile: "strict", Lower: map[string]string{"memory": "256M"}}, check: func(t *testing.T, c *Config) {
			if c.Host.Cgroup.MemoryBytes != 256<<20 {
				t.Errorf("memory %d", c.Host.Cgroup.MemoryBytes)
			}
		}},
		{name: "a request may not raise memory", req: Request{Profile: "strict", Lower: map[string]string{"memory": "2G"}},
			wantErr: `limits.memory "2G": above the profile's 256M (strict); a request may only lower a limit`},
		{name: "a request may not raise cpus", req: Request{Profile: "strict", Lower: map[string]string{"cpus": "64"}},
			wantErr: `limits.cpus "64": above the profile's`},
		{name: "nor the wall time", req: Request{Profile: "strict", Lower: map[string]string{"wall_time": "1h"}},
			wantErr: `limits.wall_time "1h": above the profile's 10s`},
		{name: "lowered after the flags", req: Request{Profile: "strict", Flags: flags(map[string][]string{"memory": {"1G"}}), Lower: map[string]string{"memory": "2G"}},
			wantErr: `limits.memory "2G": above the profile's 1G`},
		{name: "not a limit", req: Request{Profile: "strict", Lower: map[string]string{"memroy": "1M"}},
			wantErr: `limits.memroy: not a limit a request may set (did you mean memory?)`},
		{name: "an enum is not a number", req: Request{Profile: "strict", Lower: map[string]string{"output_policy": "truncate"}},
			wantErr: `limits.output_policy: not a limit a request may set`},
		{name: "bad value", req: Request{Profile: "strict", Lower: map[string]string{"memory": "lots"}},
			wantErr: `limits.memory "lots": not a size`},
		{name: "below the schema's floor", req: Request{Profile: "strict", Lower: map[string]string{"memory": "1K"}},
			wantErr: `limits.memory "1K": must be at least 1M`},
		{name: "resolve without network", req: Request{Profile: "strict", Resolve: []string{"a.example:443:127.0.0.1"}, ResolveFlag: "--resolve"},
			wantErr: `--resolve: the network is off`},
		{name: "proxy settings", req: Request{Profile: "standard", Flags: flags(map[string][]string{"allow-host": {"api.example.com"}}), Resolve: []string{"api.example.com:443:127.0.0.1"}}, check: func(t *testing.T, c *Config) {
			want := &ProxyConfig{Allow: []string{"api.example.com"}, Resolve: map[string]string{"api.example.com:443": "127.0.0.1"},
				MaxConns: 16, MaxBytesUp: 64 << 20, MaxBytesDown: 256 << 20, IdleTimeout: time.Minute}
			if !reflect.DeepEqual(c.Proxy, want) {
				t.Errorf("proxy = %+v, want %+v", c.Proxy, want)
			}
		}},
		{name: "bad pin", req: Request{Profile: "standard", Flags: flags(map[string][]string{"net": {"allow"}}), Resolve: []string{"nope"}},
			wantErr: `resolve "nope": want NAME:PORT:ADDR`},
		{name: "unknown profile", req: Request{Profile: "nosuch"}, wantErr: "nosuch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Build("id1", tc.req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				if c != nil {
					t.Errorf("a Config came with the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
			// The Config is plain data: it survives JSON.
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var back Config
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Spec, c.Spec) || back.Host != c.Host || !reflect.DeepEqual(back.Proxy, c.Proxy) || back.ProfileSHA256() != c.ProfileSHA256() {
				t.Errorf("JSON round trip changed the Config:\n%s", b)
			}
		})
	}
}

// A refused Lower leaves the profile as it was: no half-applied request.
func TestLowerAllOrNothing(t *testing.T) {
	p, err := profiles.Load("strict")
	if err != nil {
		t.Fatal(err)
	}
	before := p.Limits
	if err := p.Lower(map[string]string{"memory": "128M", "pids": "1000"}); err == nil {
		t.Fatal("pids 1000 above strict's accepted")
	}
	if p.Limits != before || p.Origin("limits.memory").Kind == profiles.FromRequest {
		t.Errorf("limits changed by a refused request: %+v", p.Limits)
	}
}

// The audit line's profile_sha256 is the SHA-256 of the effective
// profile's JSON, flags and the host's clamp included, whether Build
// computes it or the audit asks for it later (issue 13): the value the
// docs promise stays.
func TestAuditProfileSHA256(t *testing.T) {
	cfg, err := Build("id1", Request{Profile: "strict", Flags: flags(map[string][]string{"memory": {"128M"}, "cpus": {"1000"}})})
	if err != nil {
		t.Fatal(err)
	}
	defer cfg.Close()
	path := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	res := nsjail.SetupFailure(cfg.ID, cfg.Profile.Name, errors.New("not run"))
	if err := Audit(log, cfg, res, nsjail.Payload{Argv: []string{"true"}}, false, Who{}); err != nil {
		t.Fatal(err)
	}
	line, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		ProfileSHA256 string `json:"profile_sha256"`
	}
	if err := json.Unmarshal(line, &e); err != nil {
		t.Fatal(err)
	}
	// Computed here afresh, from a profile loaded and overridden the same
	// way: memory lowered, the CPUs clamped to this host.
	p, err := profiles.Load("strict")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ApplyFlags(flags(map[string][]string{"memory": {"128M"}, "cpus": {"1000"}})); err != nil {
		t.Fatal(err)
	}
	ClampToHost(p)
	pj, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pj)
	if want := hex.EncodeToString(sum[:]); e.ProfileSHA256 != want {
		t.Errorf("audit profile_sha256 = %s, want %s (sha256 of %s)", e.ProfileSHA256, want, pj)
	}
	if !strings.Contains(string(pj), `"Memory":"128M"`) {
		t.Errorf("the profile hashed lacks the flag's memory: %s", pj)
	}
}
