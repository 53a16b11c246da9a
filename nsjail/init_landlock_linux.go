package nsjail

import (
	"fmt"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/sbx-sandbox/sbx/rootfs"
)

// landlockConfig is the Landlock ruleset that the init's main thread, and
// so the payload it forks, runs under: one layer below the namespaces
// (landlock(7)).
//
// It is pinned to ABI 7, the newest this was tested on: go-landlock
// warns that each new ABI may refuse more (ABI 9 handles connect(2) to
// pathname unix sockets, ABI 10 UDP), so moving up is a reviewed change.
// BestEffort uses what an older kernel has, down to nothing at all; the
// Result's layers say what it got (landlockLayer) and --require landlock
// refuses a host without it.
//
// The TCP rights of ABI 4 are deliberately not handled. Landlock's
// network rules match ports only, never addresses, and inside the
// sandbox's network namespace the only peers are the payload's own
// loopback servers (often on ephemeral ports: asyncio, socketserver,
// multiprocessing managers bind port 0) and, with the proxy, sbx's
// listener on ProxyAddr. A port rule could block neither the outside
// (there is no route to it) nor anything reachable without breaking
// those servers. The network namespace is the network layer; Landlock
// adds the IPC scopes of ABI 6, which keep signals and abstract unix
// sockets inside the sandbox's own Landlock domain.
var landlockConfig = func() landlock.Config {
	c := landlock.V7
	c.HandledAccessNet = 0
	return c.BestEffort()
}()

// landlockMaxABI is the ABI landlockConfig asks for.
const landlockMaxABI = 7

// landlockPaths are the places the ruleset lets the payload write: the
// directories of the mounts that are writable once the plan has run, and
// the device nodes bound after the seal.
type landlockPaths struct {
	Dirs    []string
	Devices []string
}

// landlockWritable derives the writable paths from the mount plan rather
// than from a list of its own, so that what Landlock allows follows what
// the plan mounts: only what is mounted after the KindSeal step can be
// writable (the seal makes everything before it read-only), that is each
// mount that no later KindRemountRO seals: the tmpfs mounts (the
// workspace, /tmp, /dev/shm; not /dev itself), the binds (the device
// nodes), and any kind of mount added later (a devpts, say), taken as a
// directory. The procfs is left read-only on purpose: nothing a payload
// needs writes to /proc, and Landlock refuses the /proc/self/* and
// /proc/sys writes that the mount would allow. Dirs, files and symlinks
// are entries inside a mount already listed, not mounts.
func landlockWritable(mounts []rootfs.Mount) landlockPaths {
	sealed := false
	kind := map[string]rootfs.Kind{}
	var order []string
	for _, m := range mounts {
		switch m.Kind {
		case rootfs.KindSeal:
			sealed = true
		case rootfs.KindRemountRO:
			delete(kind, m.Dst)
		case rootfs.KindProc, rootfs.KindDir, rootfs.KindFile, rootfs.KindSymlink:
		default:
			if !sealed {
				continue
			}
			if _, ok := kind[m.Dst]; !ok {
				order = append(order, m.Dst)
			}
			kind[m.Dst] = m.Kind
		}
	}
	var p landlockPaths
	for _, dst := range order {
		switch k, ok := kind[dst]; {
		case !ok:
		case k == rootfs.KindBind:
			p.Devices = append(p.Devices, dst)
		default:
			p.Dirs = append(p.Dirs, dst)
		}
	}
	return p
}

// landlockRules are the rules of the ruleset: read and execute anywhere,
// everything in the writable directories (with "refer", so that a file
// may be renamed or linked from one directory to another inside them:
// Landlock refuses any reparenting without it, even on ABI 1, which is why
// BestEffort skips ABI 1 altogether), and reading, writing and ioctl(2)
// on the device nodes (ABI 5 would refuse ioctls such as TCGETS on them).
// The directories get ioctl too: a tmpfs holds no device (nodev, and no
// mknod in a user namespace), but a devpts would need it for its ttys.
func landlockRules(p landlockPaths) []landlock.Rule {
	rules := []landlock.Rule{landlock.RODirs("/")}
	if len(p.Dirs) > 0 {
		rules = append(rules, landlock.RWDirs(p.Dirs...).WithRefer().WithIoctlDev())
	}
	if len(p.Devices) > 0 {
		rules = append(rules, landlock.RWFiles(p.Devices...).WithIoctlDev())
	}
	return rules
}

// landlockRestrictSelf creates the ruleset (landlock_create_ruleset(2),
// landlock_add_rule(2)) and enforces it on the init's main thread, the one
// that forks the payload (landlock_restrict_self(2)): a Landlock domain is
// per thread and inherited across fork and execve, so the payload and all
// it starts get it.
//
// Only that thread, on purpose. Below ABI 8 go-landlock's Restrict
// enforces on every thread through libpsx, one landlock_restrict_self per
// thread, and each call makes a domain of its own: the ABI 6 signal scope
// then refuses the init's control goroutine, on another thread, its
// kill(2) of the payload (signal forwarding, the kill on a limit), since
// sibling domains may not signal each other. With one domain that cannot
// happen, on any ABI, and no signal has to reach every init thread first.
// The init's other threads run only its own loops (the control pipe, the
// denial server); the main thread, which also walks the hostile workspace
// for the report, is confined.
//
// It runs after pivot_root, so "/" is the sandbox's root, after
// no_new_privs (which landlock_restrict_self needs, or CAP_SYS_ADMIN), and
// before seccomp, which does not let these syscalls through. What the init
// still does on this thread afterwards only reads files (the workspace
// report) and writes to pipes it already holds, which Landlock does not
// check. The caller holds runtime.LockOSThread for good (Init), as
// go-landlock's NewRulesetFD asks.
func landlockRestrictSelf(s *Spec) error {
	if !s.Landlock {
		return nil
	}
	p := landlockWritable(s.Mounts)
	fd, flags, err := landlockConfig.NewRulesetFD(landlockRules(p)...)
	if err != nil {
		return fmt.Errorf("landlock_create_ruleset (%v, read-write %s, devices %s): %w", landlockConfig, strings.Join(p.Dirs, " "), strings.Join(p.Devices, " "), err)
	}
	if fd < 0 {
		return nil // no usable Landlock here; the Result's layers say so
	}
	defer unix.Close(fd)
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self(%d, %#x): %w", fd, flags, err)
	}
	return nil
}
