//go:build integration

package tests

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// probeAllowed are the probe's control calls, which every policy allows.
var probeAllowed = map[string]bool{"getpid": true, "personality:query": true, "socket:AF_INET": true, "socket:AF_UNIX": true}

func TestSeccompDeniesTheAttackSurface(t *testing.T) {
	for _, profile := range []string{"standard", "strict"} {
		t.Run(profile, func(t *testing.T) {
			forEach(t, func(t *testing.T, r runner) {
				int80 := "killed:SIGKILL"
				if !int80Outcome(t) {
					int80 = "killed:SIGSEGV"
				}
				var got map[string]string
				res := r.okResult(t, &got, "--profile", profile, data("seccomp_probe.py"))
				if len(got) < 60 {
					t.Fatalf("probe tried %d calls, want the whole list", len(got))
				}
				for call, result := range got {
					want := "EPERM"
					switch {
					case probeAllowed[call]:
						want = "ok"
					case call == "clone3":
						want = "ENOSYS"
					case call == "int0x80":
						want = int80
					case strings.HasPrefix(call, "x32:"):
						// The init kills it for the filter, and records it.
						want = "killed:SIGKILL"
					}
					if result != want {
						t.Errorf("%s: %s, want %s", call, result, want)
					}
				}
				denied := map[string]int{}
				for _, d := range res.SeccompDenials {
					denied[d.Syscall] = d.Count
				}
				for _, name := range []string{"ptrace", "mount", "bpf", "io_uring_setup", "keyctl", "unshare", "setns", "init_module", "kexec_load", "ioctl", "socket", "personality", "process_vm_readv"} {
					if denied[name] < 1 {
						t.Errorf("seccomp_denials lacks %s: %v", name, res.SeccompDenials)
					}
				}
				if denied["clone3"] != 0 {
					t.Errorf("clone3's silent ENOSYS was counted: %v", res.SeccompDenials)
				}
			})
		})
	}
}

// A call through another ABI (x32; int 0x80 where the kernel has it) is
// the filter's kill, reported as status seccomp.
func TestSeccompKillIsReported(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		hasInt80 := int80Outcome(t)
		for _, payload := range []string{"x32.py", "int80.py"} {
			res, out := r.result(t, data(payload))
			if payload == "int80.py" && !hasInt80 {
				// The fault, as on the host: nothing ran, and the Result
				// does not blame the filter.
				if res.Status != nsjail.StatusSignal || res.Signal == nil || *res.Signal != "SIGSEGV" || res.Stdout != "calling\n" {
					t.Errorf("int 0x80 without IA32 emulation: status %s signal %v, sbx exit %d (%s), stdout %q; want signal SIGSEGV as on the host", res.Status, res.Signal, out.code, res.Message, res.Stdout)
				}
				continue
			}
			// SIGKILL: the init killed it for the filter, which is the
			// evidence a SIGSYS the payload sent itself does not have.
			if res.Status != nsjail.StatusSeccomp || out.code != nsjail.ExitKilled || res.Signal == nil || *res.Signal != "SIGKILL" {
				t.Fatalf("%s: status %s signal %v, sbx exit %d (%s); want seccomp, SIGKILL, 137", payload, res.Status, res.Signal, out.code, res.Message)
			}
			if !strings.Contains(res.Message, "another ABI") || res.Stdout != "calling\n" {
				t.Errorf("%s: message %q stdout %q", payload, res.Message, res.Stdout)
			}
		}
	})
}

func TestPrivilegesStayDropped(t *testing.T) {
	// Without the seccomp filter too: each layer must hold on its own.
	for _, profile := range []string{"standard", data("profiles/no-seccomp.toml")} {
		forEach(t, func(t *testing.T, r runner) {
			var got map[string]any
			r.okResult(t, &got, "--profile", profile, data("privs.py"))
			want := map[string]any{
				"securebits":          float64(0xef), // NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, their locks, KEEP_CAPS locked off
				"ambient_raise":       "EPERM",
				"ptrace_init":         "EPERM",
				"init_exe":            "EACCES",
				"init_mem":            "EACCES",
				"init_environ":        "EACCES",
				"max_user_namespaces": "0",
				"setuid0":             "EINVAL",
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s (%s): %v, want %v", k, profile, got[k], v)
				}
			}
			if got["unshare_cmd"] == float64(0) {
				t.Errorf("unshare -U succeeded inside the sandbox (%s)", profile)
			}
		})
	}
}

func TestProfileShowPrintsPolicy(t *testing.T) {
	out := runners()[0].exec(t, "", "profile", "show", "strict")
	if out.code != 0 {
		t.Fatalf("exit %d: %s", out.code, out.stderr)
	}
	for _, want := range []string{`limits.memory           = "256M"`, "# strict:", `seccomp.policy          = "allowlist"`, "execve, execveat: allow", "other ABIs (32-bit int 0x80, x32): kill"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("profile show strict lacks %q", want)
		}
	}
	var js map[string]any
	out = runners()[0].exec(t, "", "profile", "show", "--json", "standard")
	if err := json.Unmarshal([]byte(out.stdout), &js); err != nil {
		t.Errorf("profile show --json: %v", err)
	}
}

func TestCustomProfileExtendsStrict(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		res, _ := r.result(t, "--profile", data("profiles/custom-strict.toml"), "--pids", "48", "-c", "import os; print(os.environ['MODE'])")
		if res.Status != nsjail.StatusOK || res.Stdout != "custom\n" {
			t.Fatalf("status %s (%s) stdout %q", res.Status, res.Message, res.Stdout)
		}
		want := map[string]float64{
			"memory":         384 << 20, // the file
			"wall_time":      20000,     // the file
			"pids":           48,        // the flag
			"cpu_time":       5000,      // strict
			"output":         1 << 20,   // strict
			"workspace_size": 64 << 20,  // strict
		}
		for k, v := range want {
			if res.Limits[k].Value != v {
				t.Errorf("limits.%s = %v, want %v", k, res.Limits[k].Value, v)
			}
		}
		if res.Layers["seccomp"].Detail == "" || !strings.HasPrefix(res.Layers["seccomp"].Detail, "allowlist") {
			t.Errorf("seccomp layer %+v, want strict's allowlist", res.Layers["seccomp"])
		}
		out := r.exec(t, "", "profile", "show", data("profiles/custom-strict.toml"), "--pids", "48")
		lines := map[string]string{}
		for _, l := range strings.Split(out.stdout, "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[1] == "=" {
				lines[f[0]] = strings.Join(f[2:], " ")
			}
		}
		for key, want := range map[string]string{
			"limits.memory":   `"384M" # ` + data("profiles/custom-strict.toml") + ":6",
			"limits.pids":     "48 # flag --pids",
			"limits.cpu_time": `"5s" # strict:16`,
		} {
			if lines[key] != want {
				t.Errorf("profile show: %s = %q, want %q", key, lines[key], want)
			}
		}
	})
}
