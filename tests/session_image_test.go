//go:build integration

package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// imageLockFDs counts pid's open fds of the store's image locks
// (SBX_HOME/locks/*.lock): one per engine.Config still held.
func imageLockFDs(t *testing.T, pid int, home string) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	n := 0
	for _, e := range ents {
		if p, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil &&
			strings.HasPrefix(p, filepath.Join(home, "locks")+"/") && strings.HasSuffix(p, ".lock") {
			n++
		}
	}
	return n
}

// imageLockFDsSettle is imageLockFDs once it has come down to at most
// want, or after 30 s: a run's Config is closed just after its reply.
func imageLockFDsSettle(t *testing.T, pid int, home string, want int) int {
	t.Helper()
	n := imageLockFDs(t, pid, home)
	for deadline := time.Now().Add(30 * time.Second); n > want && time.Now().Before(deadline); n = imageLockFDs(t, pid, home) {
		time.Sleep(200 * time.Millisecond)
	}
	return n
}

// imageProfile pulls ref into a fresh store of r's (SBX_HOME for the rest
// of the test) and writes a profile that runs on it.
func imageProfile(t *testing.T, r runner, ref string) (home, prof string) {
	t.Helper()
	home = storeHome(t, r)
	if out := sbxIn(t, r, home, "image", "pull", ref); out.code != 0 {
		t.Fatalf("image pull: exit %d: %s%s", out.code, out.stdout, out.stderr)
	}
	prof = filepath.Join(home, "on-image.toml")
	if err := os.WriteFile(prof, []byte(fmt.Sprintf("extends = \"standard\"\nimage = %q\n", ref)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SBX_HOME", home)
	return home, prof
}

// stopThenRemoveImage stops the server, then removes ref: "removed", not
// "untagged", says the server left no lock on the image behind.
func stopThenRemoveImage(t *testing.T, s *server, r runner, home, ref string) {
	t.Helper()
	if err := s.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if out := sbxIn(t, r, home, "image", "rm", ref); out.code != 0 || !strings.Contains(out.stdout, "removed") {
		t.Errorf("image rm after the server: exit %d: %s%s", out.code, out.stdout, out.stderr)
	}
}

// TestSessionImageLock: a session on an image profile holds the image's
// shared lock (its engine.Config) for as long as its sandbox lives, and
// releases it when the session ends, pooled (--session-pool) or not: a
// lock left would keep `sbx image rm` from removing the tree ("untagged")
// for as long as the server runs.
func TestSessionImageLock(t *testing.T) {
	reg := startRegistry(t)
	img := buildImage(t, []string{"PATH=/usr/local/bin:/usr/bin"}, hostPythonLayer(t))
	ref, _ := reg.push(t, "t/session-python:v1", img)
	forEach(t, func(t *testing.T, r runner) {
		home, prof := imageProfile(t, r, ref)
		s := startServe(t, r, "", "--profiles", prof, "--session-pool", prof+"=1")
		pid := s.cmd.Process.Pid

		var pooled string
		deadline := time.Now().Add(90 * time.Second)
		for pooled == "" && time.Now().Before(deadline) {
			time.Sleep(300 * time.Millisecond)
			resp := s.do("POST", "/v1/sessions", map[string]any{"profile": prof})
			var info struct {
				ID     string `json:"id"`
				Pooled bool   `json:"pooled"`
			}
			json.NewDecoder(resp.Body).Decode(&info)
			resp.Body.Close()
			if info.Pooled {
				pooled = info.ID
			} else if info.ID != "" {
				s.do("DELETE", "/v1/sessions/"+info.ID, nil).Body.Close()
			}
		}
		if pooled == "" {
			t.Fatalf("no pooled session within 90s:\n%s", s.stderr)
		}
		cold := s.newSession(map[string]any{"profile": prof, "limits": map[string]any{"memory": "256M"}})
		for i := 0; i < 5; i++ {
			for _, id := range []string{pooled, cold} {
				if ex := s.cell(id, "import sbx_image_marker; sbx_image_marker.WHERE"); mainText(ex) != "'image'" {
					t.Fatalf("a cell of session %s on the image: %+v", id, ex)
				}
			}
		}
		if n := imageLockFDs(t, pid, home); n < 2 {
			t.Errorf("two sessions live on the image, the server holds %d image locks, want at least 2 (one each)", n)
		}
		for _, id := range []string{pooled, cold} {
			if resp := s.do("DELETE", "/v1/sessions/"+id, nil); resp.StatusCode/100 != 2 {
				t.Errorf("DELETE session %s: %s", id, resp.Status)
			}
		}
		// What may remain is the pool's one sandbox started ahead, whose
		// Config is the pool's until claimed or closed.
		if n := imageLockFDsSettle(t, pid, home, 1); n > 1 {
			t.Errorf("both sessions ended, the server still holds %d image locks, want at most 1 (the pool's)", n)
		}
		stopThenRemoveImage(t, s, r, home, ref)
	})
}

// TestServePoolImageLock: a warm sandbox of sbx serve --pool on an image
// profile holds the image's shared lock (its engine.Config) while it
// waits, and releases it once claimed (the run's own Config holds it
// then) or destroyed; the pool's template holds none. Before, every warm
// sandbox's Config was left to the GC: the locks piled up with the runs
// and `sbx image rm` found the tree in use.
func TestServePoolImageLock(t *testing.T) {
	reg := startRegistry(t)
	img := buildImage(t, []string{"PATH=/usr/local/bin:/usr/bin"}, hostPythonLayer(t))
	ref, _ := reg.push(t, "t/pool-python:v1", img)
	forEach(t, func(t *testing.T, r runner) {
		home, prof := imageProfile(t, r, ref)
		s := startServe(t, r, "", "--profiles", prof, "--pool", prof+"=1")
		pid := s.cmd.Process.Pid

		pooled := 0
		for deadline := time.Now().Add(120 * time.Second); pooled < 5 && time.Now().Before(deadline); {
			resp := s.do("POST", "/v1/exec", map[string]any{"profile": prof, "code": "import sbx_image_marker; print(sbx_image_marker.WHERE)"})
			var res struct {
				Status string `json:"status"`
				Stdout string `json:"stdout"`
				Pooled bool   `json:"pooled"`
			}
			err := json.NewDecoder(resp.Body).Decode(&res)
			resp.Body.Close()
			if err != nil || res.Status != "ok" || res.Stdout != "image\n" {
				t.Fatalf("a run on the image: %s %+v (%v)\nserver:\n%s", resp.Status, res, err, s.stderr)
			}
			if res.Pooled {
				pooled++
			} else {
				time.Sleep(300 * time.Millisecond) // the pool is still starting
			}
		}
		if pooled < 5 {
			t.Fatalf("%d pooled runs within 120s, want 5:\n%s", pooled, s.stderr)
		}
		// What may remain is the one warm sandbox waiting (the pool
		// refills), whose Config is the pool's until claimed or closed.
		if n := imageLockFDsSettle(t, pid, home, 1); n > 1 {
			t.Errorf("after 5 pooled runs the server holds %d image locks, want at most 1 (the warm sandbox waiting)", n)
		}
		stopThenRemoveImage(t, s, r, home, ref)
	})
}
