package nsjail

import "github.com/sbx-sandbox/sbx/nsjail/spec"

// The session contract's types (issue 15) live in nsjail/spec with the
// others (contract.go).
type (
	Execution  = spec.Execution
	ExecStatus = spec.ExecStatus
	LogChunk   = spec.LogChunk
	MIMEBundle = spec.MIMEBundle
	ResultFile = spec.ResultFile
	PyError    = spec.PyError
	PyFrame    = spec.PyFrame
	ExecUsage  = spec.ExecUsage
	CellEgress = spec.CellEgress
)

// Large result items (spec.InlineResultBytes, spec.ResultsDir).
const (
	InlineResultBytes = spec.InlineResultBytes
	ResultsDir        = spec.ResultsDir
)

// Session execution statuses (spec.ExecStatus).
const (
	ExecOK           = spec.ExecOK
	ExecError        = spec.ExecError
	ExecTimeout      = spec.ExecTimeout
	ExecInterrupted  = spec.ExecInterrupted
	ExecKilled       = spec.ExecKilled
	ExecSessionEnded = spec.ExecSessionEnded
)
