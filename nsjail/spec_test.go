package nsjail

import (
	"strings"
	"testing"

	"github.com/sbx-sandbox/sbx/rootfs"
)

func validSpec() Spec {
	return Spec{
		Version: SpecVersion, ID: "x", Hostname: "sbx", UID: 1000, GID: 1000,
		Mounts:  []rootfs.Mount{{Kind: rootfs.KindTmpfs, Dst: "/workspace", Size: 1, Inodes: 1}},
		Workdir: "/workspace", Env: []string{"A=1"},
		Rlimits: []Rlimit{{Resource: "RLIMIT_CORE"}},
		Outputs: DefaultOutputSpec(),
		Seccomp: "denylist",
	}
}

func TestSpecValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Spec)
		want   string
	}{
		{"valid", func(*Spec) {}, ""},
		{"version", func(s *Spec) { s.Version = 99 }, "spec version 99"},
		{"uid", func(s *Spec) { s.UID = -1 }, "uid -1"},
		{"hostname", func(s *Spec) { s.Hostname = "a b" }, "hostname"},
		{"workdir relative", func(s *Spec) { s.Workdir = "work" }, "workdir"},
		{"workdir without tmpfs", func(s *Spec) { s.Workdir = "/other" }, "no tmpfs"},
		{"env", func(s *Spec) { s.Env = []string{"NOEQUALS"} }, "KEY=VALUE"},
		{"rlimit", func(s *Spec) { s.Rlimits = []Rlimit{{Resource: "RLIMIT_BOGUS"}} }, "unknown resource"},
		{"seccomp policy", func(s *Spec) { s.Seccomp = "mine" }, "seccomp policy \"mine\""},
		{"output caps", func(s *Spec) { s.Outputs.MaxFiles = 0 }, "output caps"},
		{"output walk timeout", func(s *Spec) { s.Outputs.WalkTimeout = 0 }, "output walk timeout"},
		{"mask in the plan", func(s *Spec) {
			s.Mounts = append(s.Mounts, rootfs.Mount{Kind: rootfs.KindMaskFile, Dst: "/proc/kcore"})
		}, "belongs in proc_masks"},
		{"mask kind", func(s *Spec) { s.ProcMasks = []rootfs.Mount{{Kind: rootfs.KindTmpfs, Dst: "/proc/x"}} }, "is not a mask"},
		{"mask outside /proc", func(s *Spec) { s.ProcMasks = []rootfs.Mount{{Kind: rootfs.KindMaskFile, Dst: "/proc/../etc/passwd"}} }, "below /proc/"},
		{"procfs unmasked", func(s *Spec) { s.Mounts = append(s.Mounts, rootfs.Mount{Kind: rootfs.KindProc, Dst: "/proc"}) }, "no proc_masks"},
		{"procfs masked", func(s *Spec) {
			s.Mounts = append(s.Mounts, rootfs.Mount{Kind: rootfs.KindProc, Dst: "/proc"})
			s.ProcMasks = rootfs.ProcMasks()
		}, ""},
		{"rlimit order", func(s *Spec) { s.Rlimits = []Rlimit{{Resource: "RLIMIT_NOFILE", Soft: 2, Hard: 1}} }, "above hard"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.mutate(&s)
			err := s.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCheckPayload(t *testing.T) {
	ok := []string{"a.py", "in/b.csv", "x..y"}
	bad := []string{"", "/abs", "../up", "a/../../b", "a/./b", ".", "..", "a//b", "a/"}
	for _, p := range ok {
		if err := CheckPayload(&Payload{Argv: []string{"x"}, Files: []File{{Path: p}}}); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range bad {
		if err := CheckPayload(&Payload{Argv: []string{"x"}, Files: []File{{Path: p}}}); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
	if err := CheckPayload(&Payload{}); err == nil {
		t.Error("empty argv accepted")
	}
	if err := CheckPayload(&Payload{Argv: []string{"x"}, Files: []File{{Path: "a"}, {Path: "a"}}}); err == nil {
		t.Error("duplicate input accepted")
	}
}

func TestLockedFlags(t *testing.T) {
	got := mountFlagNames(lockedFlags(0x2 | 0x4 | 0x8 | 0x400))
	if got != "nosuid,nodev,noexec,noatime" {
		t.Fatalf("lockedFlags = %q", got)
	}
}
