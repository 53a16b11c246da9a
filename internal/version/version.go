// Package version says which sbx this is: the version and commit the
// Makefile stamps in with -ldflags -X (git describe --always --dirty, git
// rev-parse HEAD), or else what the Go toolchain recorded of the checkout
// (runtime/debug.ReadBuildInfo, vcs.revision; go build stamps it since Go
// 1.18 unless -buildvcs=false), or else "dev" and "unknown".
package version

import "runtime/debug"

// Set by the Makefile:
//
//	-X github.com/sbx-sandbox/sbx/internal/version.version=$(VERSION)
//	-X github.com/sbx-sandbox/sbx/internal/version.commit=$(COMMIT)
var (
	version string
	commit  string
)

// Version is the release or `git describe` name of this build, "dev"
// when nothing says.
func Version() string {
	if version != "" {
		return version
	}
	if rev, modified := vcs(); rev != "" {
		v := rev[:min(len(rev), 12)]
		if modified {
			v += "-dirty"
		}
		return v
	}
	return "dev"
}

// Commit is the full commit hash this build is from, "unknown" when
// nothing says.
func Commit() string {
	if commit != "" {
		return commit
	}
	if rev, _ := vcs(); rev != "" {
		return rev
	}
	return "unknown"
}

func vcs() (rev string, modified bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return rev, modified
}
