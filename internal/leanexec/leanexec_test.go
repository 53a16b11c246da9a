package leanexec

import "testing"

func TestOneP(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		euid int
		want bool
	}{
		{"exec, unprivileged", []string{"sbx", "exec", "--", "/bin/true"}, 65534, true},
		{"exec alone", []string{"sbx", "exec"}, 1000, true},
		{"exec as root keeps two (cgroup v1 attach)", []string{"sbx", "exec", "--", "/bin/true"}, 0, false},
		{"serve keeps every CPU", []string{"sbx", "serve"}, 65534, false},
		{"no command", []string{"sbx"}, 65534, false},
		{"empty", nil, 65534, false},
		{"help of exec", []string{"sbx", "help", "exec"}, 65534, false},
		{"the init's argv", []string{"sbx", "__sbx_init"}, 65534, false},
		{"exec as a later argument", []string{"sbx", "profile", "show", "exec"}, 65534, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OneP(tc.argv, tc.euid); got != tc.want {
				t.Errorf("OneP(%q, %d) = %v, want %v", tc.argv, tc.euid, got, tc.want)
			}
		})
	}
}

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		gogc string
		want bool
	}{
		{"exec", []string{"sbx", "exec", "--", "/bin/true"}, "", true},
		{"exec with the user's GOGC", []string{"sbx", "exec"}, "50", false},
		{"exec with GOGC=off", []string{"sbx", "exec"}, "off", false},
		{"serve keeps Go's default", []string{"sbx", "serve"}, "", false},
		{"the init's argv", []string{"sbx", "__sbx_init"}, "", false},
		{"no command", []string{"sbx"}, "", false},
		{"exec as a later argument", []string{"sbx", "profile", "show", "exec"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GCPercent(tc.argv, tc.gogc); got != tc.want {
				t.Errorf("GCPercent(%q, %q) = %v, want %v", tc.argv, tc.gogc, got, tc.want)
			}
		})
	}
}

func TestHugeHeap(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		env  string
		want bool
	}{
		{"exec", []string{"sbx", "exec", "--", "/bin/true"}, "", true},
		{"exec, turned off", []string{"sbx", "exec"}, "0", false},
		{"the init of a one-shot run", []string{"sbx-init", "__sbx_init"}, "1", true},
		{"the init of a warm pool", []string{"sbx-init", "__sbx_init"}, "", false},
		{"serve keeps small pages", []string{"sbx", "serve"}, "", false},
		{"repl lives on", []string{"sbx", "repl"}, "", false},
		{"exec as a later argument", []string{"sbx", "profile", "show", "exec"}, "", false},
		{"no command", []string{"sbx"}, "", false},
		{"anything else is the default", []string{"sbx", "exec"}, "yes", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HugeHeap(tc.argv, tc.env); got != tc.want {
				t.Errorf("HugeHeap(%q, %q) = %v, want %v", tc.argv, tc.env, got, tc.want)
			}
		})
	}
}
