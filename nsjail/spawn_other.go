//go:build !cgo || sbx_init_only || !linux || !amd64

package nsjail

import "os/exec"

const (
	spawnPath       = "os/exec"
	spawnPathCgroup = "os/exec"
)

// spawnInit is spawn_cgo_linux.go's where it is built; here the init
// always starts through cmd.Start.
func spawnInit(*exec.Cmd) error { return errSpawnUnsupported }
