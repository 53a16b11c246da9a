package nsjail

import (
	"fmt"
	"strings"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// The supervisor's view of Landlock: the ABI this kernel offers and the
// layer a run reports (init_landlock_linux.go builds the ruleset).

// LandlockABI is the Landlock ABI the init's ruleset gets on this kernel:
// the kernel's (landlock_create_ruleset with
// LANDLOCK_CREATE_RULESET_VERSION; 0 without Landlock), capped at what sbx
// asks for. Like go-landlock (internal/abi.go) it counts an ABI 6 or later
// whose signal scoping has not had its fix (erratum 2, backported to 6.12
// LTS) as ABI 5.
func LandlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	if v >= 6 {
		if e, err := llsys.LandlockGetErrata(); err != nil || e&0x2 == 0 {
			v = 5
		}
	}
	return min(v, landlockMaxABI)
}

// landlockLayer states the Landlock layer of a run: whether the Spec asked
// for it, and what the kernel's ABI makes of landlockConfig.
func landlockLayer(s *Spec, abi int) Layer {
	if !s.Landlock {
		return Layer{State: LayerOff, Detail: "no Landlock ruleset (landlock.mode off)", ABI: abi}
	}
	switch abi {
	case 0:
		return Layer{State: LayerDegraded, Detail: "Landlock is not available on this kernel: nothing but the mounts keeps the root read-only", ABI: abi}
	case 1:
		return Layer{State: LayerDegraded, Detail: "Landlock ABI 1 is not used: it cannot allow renames between directories (ABI 2, Linux 5.19)", ABI: abi}
	}
	p := landlockWritable(s.Mounts)
	d := fmt.Sprintf("ABI %d: read and execute anywhere, write only in %s", abi, strings.Join(p.Dirs, " "))
	if len(p.Devices) > 0 {
		d += fmt.Sprintf(" and the %d device nodes", len(p.Devices))
	}
	if abi >= 6 {
		d += "; signals and abstract unix sockets scoped to the sandbox"
	}
	return Layer{State: LayerOn, Detail: d + "; TCP left to the network namespace", ABI: abi}
}
