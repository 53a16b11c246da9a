package rootfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func opts() Options {
	return Options{Workspace: "/workspace", WorkspaceSize: 1, WorkspaceInodes: 1, TmpSize: 1, TmpInodes: 1, ShmSize: 1,
		Identity: Identity{UID: 1000, GID: 1000, Hostname: "sbx", Home: "/workspace"}}
}

func TestPlanDirectoryRootfs(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"usr/bin", "etc/ssl/certs", "home/x", "var/log"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.Symlink("usr/bin", filepath.Join(dir, "bin"))
	os.WriteFile(filepath.Join(dir, "etc/ld.so.cache"), []byte("c"), 0o644)
	os.WriteFile(filepath.Join(dir, "etc/shadow"), []byte("secret"), 0o600)
	o := opts()
	o.Rootfs = dir
	o.EtcFromRootfs = DefaultEtcFromRootfs
	plan, err := Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, m := range plan {
		kinds = append(kinds, m.String())
		if strings.Contains(m.Src, "shadow") || strings.HasPrefix(m.Dst, "/home") || strings.HasPrefix(m.Dst, "/var") {
			t.Errorf("plan takes %s", m)
		}
	}
	all := strings.Join(kinds, "\n")
	for _, want := range []string{"bind " + dir + "/usr -> /usr", "symlink usr/bin -> /bin", "bind " + dir + "/etc/ld.so.cache -> /etc/ld.so.cache",
		"bind " + dir + "/etc/ssl/certs -> /etc/ssl/certs", "file /etc/passwd", "proc /proc", "tmpfs /workspace", "tmpfs /tmp", "remount-ro /dev"} {
		if !strings.Contains(all, want) {
			t.Errorf("plan lacks %q:\n%s", want, all)
		}
	}
	seal := -1
	for i, m := range plan {
		switch {
		case m.Kind == KindSeal:
			seal = i
		case seal < 0 && (m.Kind == KindTmpfs || m.Kind == KindProc):
			t.Errorf("%s comes before the seal: it would become read-only", m)
		case seal >= 0 && m.Kind == KindBind && !strings.HasPrefix(m.Dst, "/dev/"):
			t.Errorf("%s comes after the seal: it would stay writable", m)
		case m.Kind == KindSymlink && strings.Count(m.Dst, "/") == 1:
			for _, later := range plan[i:] {
				if later.Kind == KindBind && strings.HasPrefix(later.Dst, m.Dst+"/") {
					t.Errorf("%s resolves through the symlink %s", later, m)
				}
			}
		}
	}
	if seal < 0 {
		t.Fatal("no seal step")
	}
}

func TestPlanErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	cases := map[string]func(*Options){
		"--rootfs /no/such":    func(o *Options) { o.Rootfs = "/no/such" },
		"not a directory":      func(o *Options) { o.Rootfs = file },
		"must not lie inside":  func(o *Options) { o.Workspace = "/usr/work" },
		"clean absolute":       func(o *Options) { o.Workspace = "work" },
		"owned by the sandbox": func(o *Options) { o.Workspace = "/tmp/w" },
		"must be positive":     func(o *Options) { o.TmpSize = 0 },
		"read-only bind":       func(o *Options) { o.ROBinds = []string{"relative"} },
	}
	for want, mutate := range cases {
		o := opts()
		mutate(&o)
		if _, err := Plan(o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

func TestEtcFiles(t *testing.T) {
	files := etcFiles(Identity{UID: 1000, GID: 1000, Hostname: "box", Home: "/workspace"}, "")
	byName := map[string]string{}
	for _, f := range files {
		byName[f.Dst] = f.Data
	}
	if !strings.Contains(byName["/etc/passwd"], "sandbox:x:1000:1000:sandbox:/workspace:") || !strings.Contains(byName["/etc/hosts"], "box") || byName["/etc/resolv.conf"] != "" {
		t.Fatalf("etc files: %v", byName)
	}
}

func TestDevPlanHasPrivateDevpts(t *testing.T) {
	plan := devPlan(1)
	at := map[string]int{}
	for i, m := range plan {
		at[m.String()] = i
	}
	ro, ok := at["remount-ro /dev"]
	pts, okPts := at["devpts /dev/pts"]
	link, okLink := at["symlink pts/ptmx -> /dev/ptmx"]
	dir, okDir := at["dir /dev/pts"]
	if !ok || !okPts || !okLink || !okDir {
		t.Fatalf("dev plan lacks a step: %v", plan)
	}
	// The link and the mount point go in while /dev is writable; the
	// devpts mount after, so that it stays writable itself.
	if !(link < ro && dir < ro && ro < pts) {
		t.Errorf("dev plan order: symlink %d, dir %d, remount-ro %d, devpts %d", link, dir, ro, pts)
	}
	if o := plan[pts].Data; !strings.Contains(o, "newinstance") || !strings.Contains(o, "ptmxmode=0666") || !strings.Contains(o, "max=") || strings.Contains(o, "gid=") {
		t.Errorf("devpts options %q", o)
	}
}

func TestProcMasks(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range ProcMasks() {
		if !strings.HasPrefix(m.Dst, "/proc/") || filepath.Clean(m.Dst) != m.Dst || seen[m.Dst] {
			t.Errorf("mask %s: want a clean path below /proc/, once", m)
		}
		seen[m.Dst] = true
		if m.Kind != KindMaskFile && m.Kind != KindMaskDir && m.Kind != KindRebindRO {
			t.Errorf("mask %s: kind %q", m, m.Kind)
		}
	}
	for _, p := range ProcMaskTable() {
		if p.Why == "" {
			t.Errorf("mask %s has no reason", p.Path)
		}
	}
	// The runtimes' defaults (moby MaskedPaths, ReadonlyPaths) and the
	// files issue 11 found readable.
	for _, want := range []string{"kcore", "keys", "timer_list", "sched_debug", "iomem", "config.gz", "sysrq-trigger", "acpi", "scsi", "bus", "fs", "irq", "sys", "latency_stats", "timer_stats", "asound"} {
		if !seen["/proc/"+want] {
			t.Errorf("no mask for /proc/%s", want)
		}
	}
}
