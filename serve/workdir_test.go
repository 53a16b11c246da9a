package serve

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A work directory whose server is alive stays; one whose server died
// (its flock released) is removed, with its runs' files; one killed
// before its lock existed too.
func TestSweepWorkDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var live workDir
	run, err := live.run()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(run, "x"), []byte("x"), 0o600)
	dead := filepath.Join(tmp, workPrefix+"dead")
	os.MkdirAll(filepath.Join(dead, "run-1"), 0o700)
	os.WriteFile(filepath.Join(dead, workLock), nil, 0o600)
	// A lock another process held and lost when it died: flock(1) takes
	// and drops it; nothing holds it now.
	if err := exec.Command("flock", filepath.Join(dead, workLock), "true").Run(); err != nil {
		t.Logf("flock(1): %v (the lock file is unheld anyway)", err)
	}
	nolock := filepath.Join(tmp, workPrefix+"nolock")
	os.Mkdir(nolock, 0o700)
	other := filepath.Join(tmp, "sbx-serve-something-else")
	os.Mkdir(other, 0o700)

	removed, err := sweepWorkDirs(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 {
		t.Errorf("removed %v, want the dead and the lockless one", removed)
	}
	for _, p := range []string{dead, nolock} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range []string{filepath.Join(run, "x"), other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	live.remove()
	if _, err := os.Stat(filepath.Dir(run)); !os.IsNotExist(err) {
		t.Errorf("the live work directory is still there after remove")
	}
}
