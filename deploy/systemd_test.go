package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// installedBin is where the units expect sbx (make install's PREFIX).
const installedBin = "/usr/local/bin/sbx"

// TestSystemdUnitsVerify runs `systemd-analyze verify` on sbx.service and
// sbx.socket, offline (no running systemd is needed). Any message fails
// the test: verify exits 0 on an unknown key or a bad value, and only
// says so on stderr. The units name /usr/local/bin/sbx, which verify
// wants executable: a copy names an executable that exists here instead
// (SBX_BIN if set, else /bin/true); nothing else is changed.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian: apt-get install systemd): the units are not verified")
	}
	bin := "/bin/true"
	if b := os.Getenv("SBX_BIN"); b != "" {
		bin = b
	}
	dir := t.TempDir()
	var units []string
	for _, name := range []string{"sbx.service", "sbx.socket"} {
		b, err := os.ReadFile(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "sbx.service" && !bytes.Contains(b, []byte("ExecStart="+installedBin+" ")) {
			t.Fatalf("sbx.service's ExecStart does not run %s", installedBin)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte(installedBin), []byte(bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	cmd := exec.Command(analyze, append([]string{"verify"}, units...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil || strings.TrimSpace(out.String()) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out.String())
	}
}

// TestSystemdServiceSettings checks what the design depends on, so that an
// edit cannot drop it silently: a dedicated user, Delegate=yes, the
// tokens as a credential, the drain within TimeoutStopSec, and none of
// the options that break user namespaces or a fresh /proc.
func TestSystemdServiceSettings(t *testing.T) {
	b, err := os.ReadFile("systemd/sbx.service")
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			set[k] = v
		}
	}
	for k, v := range map[string]string{
		"User": "sbx", "Delegate": "yes", "NoNewPrivileges": "yes",
		"LoadCredential": "tokens:/etc/sbx/tokens", "CapabilityBoundingSet": "", "KillSignal": "SIGTERM", "TimeoutStopSec": "60s",
	} {
		if got, ok := set[k]; !ok || got != v {
			t.Errorf("sbx.service: %s=%q (set: %v), want %q", k, got, ok, v)
		}
	}
	if !strings.Contains(set["ExecStart"], "--token-file %d/tokens") {
		t.Errorf("sbx.service: ExecStart=%s does not read the credential", set["ExecStart"])
	}
	for _, k := range []string{"ProtectKernelTunables", "ProtectKernelLogs", "ProcSubset", "ProtectProc", "ProtectControlGroups", "RestrictNamespaces", "SystemCallFilter", "MemoryDenyWriteExecute", "PrivateUsers", "DynamicUser"} {
		if v, ok := set[k]; ok {
			t.Errorf("sbx.service sets %s=%s, which breaks the sandboxes (see the comment in the unit)", k, v)
		}
	}
}
