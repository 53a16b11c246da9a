package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sbx-sandbox/sbx/nsjail"
)

// ExecRequest is the body of POST /v1/exec. Exactly one of Code and Argv.
type ExecRequest struct {
	// Code is Python source, run as python3 main.py in the workspace.
	Code *string `json:"code"`
	// Argv is a program of the sandbox's root and its arguments.
	Argv []string `json:"argv"`
	// Profile is one the server offers ("" is its first).
	Profile string `json:"profile"`
	// Limits lower the profile's, by key without "limits.": "memory":
	// "256M", "wall_time": "5s", "pids": 10. None may raise one.
	Limits map[string]json.RawMessage `json:"limits"`
	// Env are additions to the sandbox's environment.
	Env map[string]string `json:"env"`
	// Stdin is the payload's whole standard input.
	Stdin string `json:"stdin"`
	// Files are written into the workspace before the run.
	Files []InputFile `json:"files"`
	// Outputs asks for the files the run created or changed, inline.
	Outputs bool `json:"outputs"`
	// Metadata is a small free-form object for the audit line.
	Metadata json.RawMessage `json:"metadata"`
}

// InputFile is one input: a workspace path and its bytes in base64.
type InputFile struct {
	Path       string `json:"path"`
	ContentB64 string `json:"content_b64"`
	// Mode is the file's permission bits (default 0644).
	Mode uint32 `json:"mode"`
}

// codeFile is where a request's code goes in the workspace: tracebacks
// name /workspace/main.py, as with `sbx exec main.py`.
const codeFile = "main.py"

// maxMetadata caps the metadata object: it goes into every audit line.
const maxMetadata = 4 << 10

// badRequest is a 400 with a message naming the field.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

// decodeRequest reads one JSON object, strictly: an unknown field is an
// error naming it, so a typo ("limit") is not silently ignored.
func decodeRequest(body io.Reader) (*ExecRequest, error) {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var req ExecRequest
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		if errors.As(err, &mbe) || errors.As(err, &ne) {
			return nil, err
		}
		return nil, badf("request body: %v", err)
	}
	if dec.More() {
		return nil, badf("request body: more than one JSON value")
	}
	return &req, nil
}

// check looks at what decoding cannot: one program, sane paths, env
// names, caps. Every error names the field.
func (req *ExecRequest) check(maxFiles int) error {
	switch {
	case req.Code == nil && len(req.Argv) == 0:
		return badf("nothing to run: give code (Python source) or argv (a program and its arguments)")
	case req.Code != nil && len(req.Argv) > 0:
		return badf("code and argv: give one of them")
	case len(req.Argv) > 0 && req.Argv[0] == "":
		return badf("argv[0]: empty program name")
	case len(req.Files) > maxFiles:
		return badf("files: %d files, past the server's %d", len(req.Files), maxFiles)
	case len(req.Metadata) > maxMetadata:
		return badf("metadata: %d bytes, past %d", len(req.Metadata), maxMetadata)
	}
	if len(req.Metadata) > 0 && (len(bytes.TrimSpace(req.Metadata)) == 0 || bytes.TrimSpace(req.Metadata)[0] != '{') {
		if string(bytes.TrimSpace(req.Metadata)) != "null" {
			return badf("metadata: want a JSON object")
		}
		req.Metadata = nil
	}
	seen := map[string]bool{}
	if req.Code != nil {
		seen[codeFile] = true
	}
	for i, f := range req.Files {
		if f.Path == "" || path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "." || strings.HasPrefix(f.Path, "../") || f.Path == ".." || strings.ContainsRune(f.Path, 0) {
			return badf("files[%d].path %q: want a clean relative path inside the workspace", i, f.Path)
		}
		if seen[f.Path] {
			if req.Code != nil && f.Path == codeFile {
				return badf("files[%d].path %q: the code goes there; name the file otherwise", i, f.Path)
			}
			return badf("files[%d].path %q: given twice", i, f.Path)
		}
		seen[f.Path] = true
		if f.Mode&^0o777 != 0 {
			return badf("files[%d].mode %#o: permission bits only", i, f.Mode)
		}
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return badf("env %q: want a name without '=' or NUL, and a value without NUL", k)
		}
	}
	return nil
}

// lower is the request's limits as Profile.Lower takes them: a JSON
// string as is ("256M"), a number by its text (10, 0.5).
func (req *ExecRequest) lower() (map[string]string, error) {
	out := map[string]string{}
	for k, raw := range req.Limits {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			out[k] = s
			continue
		}
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return nil, badf("limits.%s: want a string (\"256M\", \"5s\") or a number", k)
		}
		if _, err := strconv.ParseFloat(n.String(), 64); err != nil {
			return nil, badf("limits.%s: want a string or a number", k)
		}
		out[k] = n.String()
	}
	return out, nil
}

// payload writes the request's code and files under dir (the server's
// own, mode 0700) and returns the Payload that streams them in.
func (req *ExecRequest) payload(dir string) (nsjail.Payload, error) {
	var p nsjail.Payload
	write := func(i int, name string, data []byte, mode uint32) error {
		src := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(src, data, 0o600); err != nil {
			return fmt.Errorf("write input %s: %w", name, err)
		}
		if mode == 0 {
			mode = 0o644
		}
		p.Files = append(p.Files, nsjail.File{Path: name, Source: src, Mode: mode})
		return nil
	}
	for i, f := range req.Files {
		data, err := base64.StdEncoding.DecodeString(f.ContentB64)
		if err != nil {
			return p, badf("files[%d].content_b64: %v", i, err)
		}
		if err := write(i, f.Path, data, f.Mode); err != nil {
			return p, err
		}
	}
	if req.Code != nil {
		if err := write(len(req.Files), codeFile, []byte(*req.Code), 0o644); err != nil {
			return p, err
		}
		p.Argv = []string{"python3", codeFile}
	} else {
		p.Argv = append([]string{}, req.Argv...)
	}
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p.Env = append(p.Env, k+"="+req.Env[k])
	}
	return p, nil
}
