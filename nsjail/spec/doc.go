// Package spec is sbx's contract as plain data: the Spec that builds a
// sandbox, the Payload that runs in it, and the Result that says how it
// ended (Status, Usage, LimitInfo, Layer, the workspace's FileEntry and
// the egress proxy's Attempt and Summary).
//
// It has no cgo and imports nothing of sbx's host or init machinery
// (TestCgoFree holds it to that), so that the profile parser and the
// audit log build without libseccomp (CGO_ENABLED=0) and a Go client can
// decode a Result or build a Spec by importing this package alone. The
// nsjail package re-exports every name (nsjail.Spec = spec.Spec, ...);
// netproxy re-exports its records.
//
// What only the host or the init decides stays out: the wire messages of
// the control pipe (nsjail.Confine, StatusMsg), the wait-status mapping,
// the Result's constructor. Methods here are the ones that read the data
// alone: Spec.Validate, Result.ProcessExitCode, Result.FillEmpty,
// Result.DegradedSummary, Summary.Truncated.
package spec
