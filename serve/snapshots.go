package serve

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// Snapshots (issue 15): a session's workspace saved on the host and
// restored into a new session (POST /v1/sessions {from_snapshot}). The
// interpreter's state is not saved: a restored session starts with fresh
// globals. Only regular files are kept (their bytes and paths, not their
// modes); each is stored under a number, never under a name the sandbox
// chose, in the server's own temp directory, and removed with the server.

const (
	// MaxSnapshots are kept at once (the oldest goes first).
	MaxSnapshots = 32
	// MaxSnapshotBytes caps one snapshot's files in all.
	MaxSnapshotBytes = 512 << 20
	// maxSnapshotFiles caps one snapshot's files.
	maxSnapshotFiles = 10000
)

type snapshot struct {
	id, token string
	dir       string
	files     []nsjail.SessionFile
	created   time.Time
}

type snapshots struct {
	mu    sync.Mutex
	root  string // made at the first snapshot
	byID  map[string]*snapshot
	order []string
}

func (sn *snapshots) dir() (string, error) {
	if sn.root == "" {
		d, err := os.MkdirTemp("", "sbx-snapshots-")
		if err != nil {
			return "", err
		}
		sn.root = d
	}
	return sn.root, nil
}

// removeAll deletes every snapshot (the drain).
func (sn *snapshots) removeAll() {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.root != "" {
		os.RemoveAll(sn.root)
	}
	sn.root, sn.byID, sn.order = "", nil, nil
}

// get is the snapshot id of token, or nil.
func (sn *snapshots) get(id, token string) *snapshot {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if s := sn.byID[id]; s != nil && s.token == token {
		return s
	}
	return nil
}

func (s *Server) sessionSnapshot(w http.ResponseWriter, r *http.Request, ls *liveSession) {
	sn := &s.sess.snaps
	files, truncated, err := ls.ss.ListFiles(r.Context(), maxSnapshotFiles)
	if err != nil {
		sessionFileError(w, err)
		return
	}
	if truncated {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the workspace has more than %d files", maxSnapshotFiles))
		return
	}
	var total int64
	for _, f := range files {
		total += f.Size
	}
	if total > MaxSnapshotBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the workspace's files are %d bytes, more than a snapshot keeps (%d)", total, MaxSnapshotBytes))
		return
	}
	sn.mu.Lock()
	root, err := sn.dir()
	sn.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	snap := &snapshot{id: "snap-" + newID(), token: ls.token, created: time.Now()}
	snap.dir = filepath.Join(root, snap.id)
	if err := os.Mkdir(snap.dir, 0o700); err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	total = 0
	for i, f := range files {
		data, got, err := ls.ss.GetFile(r.Context(), f.Path)
		if err == nil && total+got.Size > MaxSnapshotBytes {
			err = fmt.Errorf("the workspace grew past %d bytes while it was saved", MaxSnapshotBytes)
		}
		if err == nil {
			total += got.Size
			err = os.WriteFile(filepath.Join(snap.dir, strconv.Itoa(i)), data, 0o600)
		}
		if err != nil {
			os.RemoveAll(snap.dir)
			sessionFileError(w, fmt.Errorf("snapshot %s: %w", f.Path, err))
			return
		}
		snap.files = append(snap.files, *got)
	}
	sn.mu.Lock()
	if sn.byID == nil {
		sn.byID = map[string]*snapshot{}
	}
	sn.byID[snap.id] = snap
	sn.order = append(sn.order, snap.id)
	for len(sn.order) > MaxSnapshots {
		old := sn.byID[sn.order[0]]
		delete(sn.byID, sn.order[0])
		sn.order = sn.order[1:]
		os.RemoveAll(old.dir)
	}
	sn.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"snapshot_id": snap.id, "files": len(snap.files), "bytes": total})
}

// restore puts a snapshot's files into a new session's workspace,
// checking each against the sha256 it was saved with.
func restore(r *http.Request, ss *nsjail.Session, snap *snapshot) error {
	for i, f := range snap.files {
		data, err := os.ReadFile(filepath.Join(snap.dir, strconv.Itoa(i)))
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", snap.id, err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != f.SHA256 {
			return fmt.Errorf("snapshot %s: %s changed on the host", snap.id, f.Path)
		}
		if _, err := ss.PutFile(r.Context(), f.Path, 0o644, bytes.NewReader(data)); err != nil {
			return fmt.Errorf("restore %s: %w", f.Path, err)
		}
	}
	return nil
}
