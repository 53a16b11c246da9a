package nsjail

import "github.com/sbx-sandbox/sbx/nsjail/spec"

// The contract types live in nsjail/spec, a package without cgo that
// profiles, audit and a Go client import (issue 12, item 6). These names
// keep every caller of nsjail.Spec, nsjail.Result and the rest compiling
// as it was.
type (
	Spec       = spec.Spec
	Rlimit     = spec.Rlimit
	Payload    = spec.Payload
	File       = spec.File
	OutputSpec = spec.OutputSpec
	Truncation = spec.Truncation
	FileEntry  = spec.FileEntry
	Result     = spec.Result
	Status     = spec.Status
	Usage      = spec.Usage
	Denial     = spec.Denial
	InputEntry = spec.InputEntry
	LimitInfo  = spec.LimitInfo
	Layer      = spec.Layer
	LayerState = spec.LayerState
	Attempt    = spec.Attempt
	Summary    = spec.Summary
	Forward    = spec.Forward
	Evidence   = spec.Evidence
)

const (
	EvidenceOOMKill      = spec.EvidenceOOMKill
	EvidencePidsEvents   = spec.EvidencePidsEvents
	EvidenceMemoryError  = spec.EvidenceMemoryError
	EvidenceTasksSampled = spec.EvidenceTasksSampled
	PidsPeakCgroup       = spec.PidsPeakCgroup
	PidsPeakSampled      = spec.PidsPeakSampled
)

const (
	SpecVersion = spec.SpecVersion
	DNSStubIP   = spec.DNSStubIP
	DenialOther = spec.DenialOther
)

const (
	StatusOK          = spec.StatusOK
	StatusExit        = spec.StatusExit
	StatusSignal      = spec.StatusSignal
	StatusTimeout     = spec.StatusTimeout
	StatusCPULimit    = spec.StatusCPULimit
	StatusMemoryLimit = spec.StatusMemoryLimit
	StatusPidsLimit   = spec.StatusPidsLimit
	StatusOutputLimit = spec.StatusOutputLimit
	StatusSeccomp     = spec.StatusSeccomp
	StatusSetupError  = spec.StatusSetupError
	StatusNotFound    = spec.StatusNotFound
	StatusCannotExec  = spec.StatusCannotExec
)

const (
	ExitTimeLimit  = spec.ExitTimeLimit
	ExitSbxFailed  = spec.ExitSbxFailed
	ExitCannotExec = spec.ExitCannotExec
	ExitNotFound   = spec.ExitNotFound
	ExitKilled     = spec.ExitKilled
)

const (
	LayerOn       = spec.LayerOn
	LayerDegraded = spec.LayerDegraded
	LayerOff      = spec.LayerOff
)

const (
	ByCgroup2    = spec.ByCgroup2
	ByCgroup1    = spec.ByCgroup1
	ByRlimit     = spec.ByRlimit
	ByTmpfs      = spec.ByTmpfs
	BySupervisor = spec.BySupervisor
	ByUserNS     = spec.ByUserNS
	ByNone       = spec.ByNone
)

const (
	NotTruncated         = spec.NotTruncated
	TruncatedFiles       = spec.TruncatedFiles
	TruncatedHashBytes   = spec.TruncatedHashBytes
	TruncatedWalkTimeout = spec.TruncatedWalkTimeout
	TruncatedTransfer    = spec.TruncatedTransfer
)

const (
	ChangeCreated  = spec.ChangeCreated
	ChangeModified = spec.ChangeModified
	ChangeDeleted  = spec.ChangeDeleted
)

// DefaultOutputSpec is spec.DefaultOutputSpec.
func DefaultOutputSpec() OutputSpec { return spec.DefaultOutputSpec() }

// CheckPayload is spec.CheckPayload.
func CheckPayload(p *Payload) error { return spec.CheckPayload(p) }

// checkRlimits checks the Confine message's rlimits as Validate checks the
// Spec's.
func checkRlimits(rl []Rlimit) error { return spec.CheckRlimits(rl) }
