package nsjail

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"
)

// A session's workspace files move through its driver, on the session
// socket: the bytes are streamed in and out of the running sandbox, never
// bind-mounted, and every path is checked on the host (CheckWorkspacePath)
// and walked again inside, component by component with O_NOFOLLOW from
// the workspace (session_driver.py, Keeper.walk).

// SessionFile is one file of a session's workspace.
type SessionFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// fileTimeout bounds one file request.
const fileTimeout = 60 * time.Second

// ErrFileTooLarge: a file passed MaxSessionFile.
var ErrFileTooLarge = fmt.Errorf("nsjail: the file is larger than %d bytes", MaxSessionFile)

// fileReq is one file request in flight; the reader fills it.
type fileReq struct {
	data     []byte
	dataCut  bool
	reply    []byte
	replyCut bool
	done     chan error
}

// take adds a frame; it reports whether the request is complete.
func (r *fileReq) take(kind byte, more bool, body []byte) bool {
	if kind == frameData {
		if len(r.data)+len(body) > MaxSessionFile {
			r.dataCut = true
		} else {
			r.data = append(r.data, body...)
		}
		return false
	}
	if len(r.reply)+len(body) > maxResultBytes {
		r.replyCut = true
	} else {
		r.reply = append(r.reply, body...)
	}
	if more {
		return false
	}
	r.done <- nil
	return true
}

func (r *fileReq) fail(err error) { r.done <- err }

// request sends one file request and waits for its reply, decoded into v.
func (ss *Session) request(ctx context.Context, kind byte, body []byte, v any) (*fileReq, error) {
	r := &fileReq{done: make(chan error, 1)}
	ss.mu.Lock()
	ss.reqSeq++
	seq := ss.reqSeq
	ss.reqs[seq] = r
	ss.mu.Unlock()
	defer func() {
		ss.mu.Lock()
		delete(ss.reqs, seq)
		ss.mu.Unlock()
	}()
	if err := ss.send(kind, seq, body); err != nil {
		return nil, err
	}
	t := time.NewTimer(fileTimeout)
	defer t.Stop()
	select {
	case err := <-r.done:
		if err != nil {
			return nil, err
		}
	case <-ss.dead:
		return nil, ErrSessionEnded
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-t.C:
		return nil, fmt.Errorf("the session's driver did not answer within %v", fileTimeout)
	}
	if r.replyCut {
		return nil, fmt.Errorf("the driver's reply passed %d bytes", maxResultBytes)
	}
	var e struct {
		Error *string `json:"error"`
	}
	if err := json.Unmarshal(r.reply, &e); err != nil {
		return nil, fmt.Errorf("the driver's reply: %w", err)
	}
	if e.Error != nil && *e.Error != "" {
		return nil, &WorkspaceError{*e.Error}
	}
	if v != nil {
		if err := json.Unmarshal(r.reply, v); err != nil {
			return nil, fmt.Errorf("the driver's reply: %w", err)
		}
	}
	return r, nil
}

// WorkspaceError is the driver's answer to a file request it could not
// do (no such file, not a regular file, the workspace full).
type WorkspaceError struct{ Msg string }

func (e *WorkspaceError) Error() string { return "workspace: " + e.Msg }

// CheckWorkspacePath accepts a relative path below the workspace, without
// empty, "." or ".." components.
func CheckWorkspacePath(p string) error {
	if p == "" || p[0] == '/' || len(p) > 4096 {
		return fmt.Errorf("path %.100q: want a relative path in the workspace", p)
	}
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			c := p[start:i]
			if c == "" || c == "." || c == ".." {
				return fmt.Errorf("path %.100q: component %q is not allowed", p, c)
			}
			start = i + 1
		} else if p[i] == 0 {
			return fmt.Errorf("path %.100q: contains NUL", p)
		}
	}
	return nil
}

// PutFile writes size bytes of r to path in the workspace (mode 0644 if
// 0), creating its directories; it returns what the driver wrote.
func (ss *Session) PutFile(ctx context.Context, path string, mode uint32, r io.Reader) (*SessionFile, error) {
	if err := CheckWorkspacePath(path); err != nil {
		return nil, err
	}
	hdr, _ := json.Marshal(map[string]any{"path": path, "mode": mode})
	ss.mu.Lock()
	ss.reqSeq++
	seq := ss.reqSeq
	req := &fileReq{done: make(chan error, 1)}
	ss.reqs[seq] = req
	ss.mu.Unlock()
	defer func() {
		ss.mu.Lock()
		delete(ss.reqs, seq)
		ss.mu.Unlock()
	}()
	// The first fragment carries the header; every fragment is sent as
	// it is read, so a file is never whole in memory here.
	first := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)))
	first = append(first, hdr...)
	h := sha256.New()
	var n int64
	buf := make([]byte, frameBody)
	pending := first
	for {
		k, rerr := io.ReadFull(r, buf[:frameBody-len(pending)])
		h.Write(buf[:k])
		n += int64(k)
		chunk := append(pending, buf[:k]...)
		pending = nil
		last := rerr != nil
		if rerr != nil && !errors.Is(rerr, io.EOF) && !errors.Is(rerr, io.ErrUnexpectedEOF) {
			// The driver closes the file at the last fragment.
			ss.sendFrame(framePut, seq, false, chunk)
			return nil, fmt.Errorf("read the file: %w", rerr)
		}
		if err := ss.sendFrame(framePut, seq, !last, chunk); err != nil {
			return nil, err
		}
		if last {
			break
		}
	}
	t := time.NewTimer(fileTimeout)
	defer t.Stop()
	select {
	case err := <-req.done:
		if err != nil {
			return nil, err
		}
	case <-ss.dead:
		return nil, ErrSessionEnded
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-t.C:
		return nil, fmt.Errorf("the session's driver did not answer within %v", fileTimeout)
	}
	var f struct {
		Error  string `json:"error"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	}
	if err := json.Unmarshal(req.reply, &f); err != nil {
		return nil, fmt.Errorf("the driver's reply: %w", err)
	}
	if f.Error != "" {
		return nil, &WorkspaceError{f.Error}
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if f.Size != n || f.SHA256 != sum {
		return nil, fmt.Errorf("the driver wrote %d bytes (sha256 %s), not the %d sent (sha256 %s)", f.Size, f.SHA256, n, sum)
	}
	return &SessionFile{Path: path, Size: n, SHA256: sum}, nil
}

// sendFrame writes one frame (a fragment of a message).
func (ss *Session) sendFrame(kind byte, seq uint32, more bool, body []byte) error {
	ss.wMu.Lock()
	defer ss.wMu.Unlock()
	if ss.sock == nil {
		return ErrSessionEnded
	}
	f := make([]byte, frameHeader, frameHeader+len(body))
	f[0] = kind
	binary.BigEndian.PutUint32(f[1:5], seq)
	if more {
		f[5] = 1
	}
	if _, err := unix.Write(ss.fd, append(f, body...)); err != nil {
		return fmt.Errorf("write the session socket: %w", err)
	}
	return nil
}

// GetFile reads path from the workspace, at most MaxSessionFile bytes;
// the sha256 is the host's, of the bytes it got.
func (ss *Session) GetFile(ctx context.Context, path string) ([]byte, *SessionFile, error) {
	if err := CheckWorkspacePath(path); err != nil {
		return nil, nil, err
	}
	body, _ := json.Marshal(map[string]any{"path": path, "max": MaxSessionFile})
	var f SessionFile
	r, err := ss.request(ctx, frameGet, body, &f)
	if err != nil {
		return nil, nil, err
	}
	if r.dataCut {
		return nil, nil, ErrFileTooLarge
	}
	sum := sha256.Sum256(r.data)
	if f.Size != int64(len(r.data)) || f.SHA256 != hex.EncodeToString(sum[:]) {
		return nil, nil, fmt.Errorf("the driver sent %d bytes but said %d (sha256 %s)", len(r.data), f.Size, f.SHA256)
	}
	return r.data, &SessionFile{Path: path, Size: f.Size, SHA256: f.SHA256}, nil
}

// ListFiles lists the workspace's regular files (at most max, 10000 if
// 0); truncated says there were more.
func (ss *Session) ListFiles(ctx context.Context, max int) (files []SessionFile, truncated bool, err error) {
	if max <= 0 {
		max = 10000
	}
	body, _ := json.Marshal(map[string]any{"max": max})
	var l struct {
		Files     []SessionFile `json:"files"`
		Truncated bool          `json:"truncated"`
	}
	if _, err := ss.request(ctx, frameList, body, &l); err != nil {
		return nil, false, err
	}
	if len(l.Files) > max {
		l.Files, l.Truncated = l.Files[:max], true
	}
	for _, f := range l.Files {
		if CheckWorkspacePath(f.Path) != nil {
			return nil, false, fmt.Errorf("the driver listed %.100q, not a workspace path", f.Path)
		}
	}
	if l.Files == nil {
		l.Files = []SessionFile{}
	}
	return l.Files, l.Truncated, nil
}

// DeleteFile removes path from the workspace.
func (ss *Session) DeleteFile(ctx context.Context, path string) error {
	if err := CheckWorkspacePath(path); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"path": path})
	_, err := ss.request(ctx, frameUnlink, body, nil)
	return err
}
