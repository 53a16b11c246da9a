package version

import "testing"

func TestStamped(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v1.2.3-4-gabcdef0-dirty", "abcdef0123"
	if Version() != version || Commit() != commit {
		t.Fatalf("Version() %q Commit() %q, want the stamped values", Version(), Commit())
	}
}

func TestUnstamped(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "", ""
	// A test binary carries no vcs settings: the last resort shows.
	if rev, _ := vcs(); rev == "" && (Version() != "dev" || Commit() != "unknown") {
		t.Fatalf("Version() %q Commit() %q, want dev and unknown", Version(), Commit())
	}
	if Version() == "" || Commit() == "" {
		t.Fatal("empty version or commit")
	}
}
