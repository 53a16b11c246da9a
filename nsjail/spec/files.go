package spec

import "time"

// OutputSpec says what the init reports of the workspace once the payload
// and all its processes are gone, and the caps that bound it.
type OutputSpec struct {
	// Send streams the contents of created and modified files to the
	// supervisor (an output directory was given); otherwise only their
	// names, sizes and hashes cross. It is the request's, not the Spec's:
	// it crosses in the Payload (Payload.Send).
	Send         bool  `json:"-"`
	MaxFiles     int64 `json:"max_files"`
	MaxBytes     int64 `json:"max_bytes"`
	MaxFileBytes int64 `json:"max_file_bytes"`
	MaxDepth     int   `json:"max_depth"`
	// MaxHashBytes bounds the logical bytes the walk hashes, holes
	// included: sha256 costs CPU for every byte of a sparse file, even
	// where reading it costs nothing (issue 11, finding 5).
	MaxHashBytes int64 `json:"max_hash_bytes"`
	// WalkTimeout bounds the walk from its start, after the payload is
	// gone: the report phase runs outside the run's limits, so it has a
	// deadline of its own. What was not reached by then is not listed.
	WalkTimeout time.Duration `json:"walk_timeout_ns"`
}

// DefaultOutputSpec caps the workspace report when the profile says
// nothing: enough for a report and its charts, not for a copy of a disk.
// The walk's 2 s fit in the supervisor's grace after the wall limit;
// hashing 1 GiB takes about 0.6 s on one core with SHA extensions.
func DefaultOutputSpec() OutputSpec {
	return OutputSpec{MaxFiles: 1000, MaxBytes: 256 << 20, MaxFileBytes: 128 << 20, MaxDepth: 32,
		MaxHashBytes: 1 << 30, WalkTimeout: 2 * time.Second}
}

// Truncation says what cut the workspace report short: the Result's
// files_truncated_reason. Everything past the cut is unlisted (and an
// input not reached is not reported deleted).
type Truncation string

const (
	NotTruncated Truncation = ""
	// TruncatedFiles: max_files entries were listed.
	TruncatedFiles Truncation = "max_files"
	// TruncatedHashBytes: the next file would have passed max_hash_bytes.
	TruncatedHashBytes Truncation = "max_hash_bytes"
	// TruncatedWalkTimeout: the walk's own deadline passed.
	TruncatedWalkTimeout Truncation = "walk_timeout"
	// TruncatedTransfer: the stream from the init broke off or broke the
	// protocol (the init was killed mid-transfer, say); a file whose
	// content was cut is removed from the output dir and not listed.
	TruncatedTransfer Truncation = "transfer_failed"
)

// Changes of a workspace entry, as the Result reports them.
const (
	ChangeCreated  = "created"
	ChangeModified = "modified"
	ChangeDeleted  = "deleted"
)

// FileEntry is one element of the Result's `files`: a workspace entry that
// the run created, modified or deleted.
type FileEntry struct {
	// Path is relative to the workspace, valid UTF-8 with no control
	// characters: any other byte is written %XX, and '%' always as %25,
	// so that two names never share a Path. The real name is then in
	// RawPathB64.
	Path       string `json:"path"`
	RawPathB64 string `json:"raw_path_b64,omitempty"`
	Change     string `json:"change"`
	// Kind is file, symlink, or the kind of a skipped entry (fifo,
	// socket, device, dir).
	Kind   string `json:"kind"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	// Target of a symlink, escaped like Path; links are never followed.
	Target string `json:"target,omitempty"`
	// HardlinkOf names the earlier entry with the same inode: its content
	// crossed once, and the copy is a hard link to the earlier copy; it
	// still counts its size against the output cap.
	HardlinkOf string `json:"hardlink_of,omitempty"`
	// CopiedTo is where the file was written on the host (--output-dir).
	CopiedTo string `json:"copied_to,omitempty"`
	// Skipped says why the entry was listed but not copied or hashed.
	Skipped string `json:"skipped,omitempty"`
}
