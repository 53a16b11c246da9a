package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultEtcFromRootfs is what the synthetic /etc takes from the rootfs's
// own /etc: the dynamic linker's cache (without it every exec scans the
// library path), the alternatives links (Debian resolves libblas.so.3,
// which numpy loads, through /etc/alternatives), the CA certificates
// (Python's ssl module looks in /etc/ssl/certs through
// /usr/lib/ssl/certs), and two files that Debian's packages keep in /etc
// but that their code cannot run without: CPython's sitecustomize hook
// (/usr/lib/python3.X/sitecustomize.py links there) and matplotlib's
// default rc file (/usr/share/matplotlib/mpl-data/matplotlibrc links
// there; without it `import matplotlib` fails), plus fontconfig's
// configuration (matplotlib and Pillow find fonts through it), and the
// services and protocols tables of netbase, which nsswitch.conf points
// at (getaddrinfo with a service name such as "http", getservbyname,
// getprotobyname; CPython's asyncio tests use them): static tables that
// say nothing about the host. Nothing else of the host's /etc enters the
// sandbox.
var DefaultEtcFromRootfs = []string{
	"ld.so.cache",
	"alternatives",
	"ssl/certs",
	"ssl/openssl.cnf",
	"fonts",
	"python3",
	"python3.11",
	"python3.12",
	"python3.13",
	"matplotlibrc",
	"services",
	"protocols",
}

// etcPlan builds /etc: passwd, group, hosts, hostname, resolv.conf and
// nsswitch.conf are written from scratch; the EtcFromRootfs entries that
// exist are bound read-only from the rootfs.
func etcPlan(root string, o Options) []Mount {
	plan := []Mount{{Kind: KindDir, Dst: "/etc", Mode: 0o755}}
	plan = append(plan, etcFiles(o.Identity, o.Nameserver)...)
	for _, rel := range o.EtcFromRootfs {
		rel = filepath.Clean(rel)
		if filepath.IsAbs(rel) || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		src := filepath.Join(root, "etc", rel)
		// Resolve links inside the rootfs only: a link that leaves it (or
		// dangles) is not followed.
		real, err := filepath.EvalSymlinks(src)
		if err != nil || !within(real, root) {
			continue
		}
		if _, err := os.Stat(real); err != nil {
			continue
		}
		plan = append(plan, Mount{Kind: KindBind, Src: real, Dst: "/etc/" + rel})
	}
	return plan
}

func within(p, root string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// etcFiles are the generated files. The sandbox user's home is the
// workspace; root exists only so that tools that look it up find it.
func etcFiles(id Identity, nameserver string) []Mount {
	user := "sandbox"
	if id.UID == 0 {
		user = "root"
	}
	var passwd, group strings.Builder
	passwd.WriteString("root:x:0:0:root:/root:/usr/sbin/nologin\n")
	group.WriteString("root:x:0:\n")
	if id.UID != 0 {
		fmt.Fprintf(&passwd, "%s:x:%d:%d:sandbox:%s:/usr/sbin/nologin\n", user, id.UID, id.GID, id.Home)
	}
	if id.GID != 0 {
		fmt.Fprintf(&group, "%s:x:%d:\n", user, id.GID)
	}
	passwd.WriteString("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
	group.WriteString("nogroup:x:65534:\n")
	resolv, hostsDB := "", "files"
	if nameserver != "" {
		// The stub answers on the sandbox's own loopback, and only for
		// names the allowlist lists whole: no search line (and the
		// hostname has no dot), so a name is asked as is and never as
		// "api.test.corp" first; one attempt and a short timeout, since a
		// datagram lost on lo is one the stub's rate limit dropped.
		resolv = "# sbx: the DNS stub answers allowlisted names only (issue 18)\nnameserver " + nameserver + "\noptions ndots:1 attempts:1 timeout:2\n"
		hostsDB = "files dns"
	}
	hosts := fmt.Sprintf("127.0.0.1\tlocalhost %[1]s\n::1\tlocalhost ip6-localhost ip6-loopback %[1]s\n", id.Hostname)
	return []Mount{
		{Kind: KindFile, Dst: "/etc/passwd", Data: passwd.String(), Mode: 0o644},
		{Kind: KindFile, Dst: "/etc/group", Data: group.String(), Mode: 0o644},
		{Kind: KindFile, Dst: "/etc/hosts", Data: hosts, Mode: 0o644},
		{Kind: KindFile, Dst: "/etc/hostname", Data: id.Hostname + "\n", Mode: 0o644},
		// No resolver but the stub, and only with the network on.
		{Kind: KindFile, Dst: "/etc/resolv.conf", Data: resolv, Mode: 0o644},
		{Kind: KindFile, Dst: "/etc/nsswitch.conf", Data: "passwd: files\ngroup: files\nshadow: files\nhosts: " + hostsDB + "\nnetworks: files\nprotocols: files\nservices: files\n", Mode: 0o644},
	}
}

// devptsOptions are the sandbox's devpts mount options (devpts.rst):
//   - newinstance: a private instance, whose ptys the host and other
//     sandboxes never see (implied since Linux 4.7, kept for older ones);
//   - ptmxmode=0666: its ptmx node is 0000 otherwise, and /dev/ptmx points
//     there;
//   - mode=0620: a new pty is its owner's, as on a host;
//   - max=64: kernel.pty.max is one host-wide pool (4096 by default, less
//     kernel.pty.reserve for the host's own instance): without a cap a
//     payload could take every pty of the host. 64 is far more than any
//     program opens at once.
//
// No gid=5 (tty): the sandbox's user namespace maps only its own gid, and
// an unmapped gid makes the mount fail with EINVAL; a pty gets the
// opener's gid, and glibc 2.33+ grantpt no longer needs the tty group.
const devptsOptions = "newinstance,ptmxmode=0666,mode=0620,max=64"

// devNodes are bound from the host's /dev: a userns cannot mknod, and these
// character devices carry no host state.
var devNodes = []string{"null", "zero", "full", "random", "urandom"}

// devPlan is the minimal /dev: the five harmless nodes, the fd links, a
// size-capped /dev/shm and the sandbox's own devpts; no host tty and no
// other host device. The /dev tmpfs is made read-only once populated so
// that nothing can be added to it; the node binds on it keep their host
// mount flags (nodev would break them).
//
// /dev/ptmx is a symlink into the private devpts (devpts.rst,
// "ptmx symlink"), so that os.openpty() and pty.spawn allocate from the
// sandbox's instance, never the host's: the /dev tmpfs is nodev, and the
// devpts mount is the one place where a device node may be opened.
func devPlan(shmSize int64) []Mount {
	plan := []Mount{{Kind: KindTmpfs, Dst: "/dev", Mode: 0o755, Size: 64 << 10, Inodes: 64, NoExec: true}}
	for _, n := range devNodes {
		plan = append(plan, Mount{Kind: KindBind, Src: "/dev/" + n, Dst: "/dev/" + n})
	}
	plan = append(plan,
		Mount{Kind: KindSymlink, Src: "/proc/self/fd", Dst: "/dev/fd"},
		Mount{Kind: KindSymlink, Src: "/proc/self/fd/0", Dst: "/dev/stdin"},
		Mount{Kind: KindSymlink, Src: "/proc/self/fd/1", Dst: "/dev/stdout"},
		Mount{Kind: KindSymlink, Src: "/proc/self/fd/2", Dst: "/dev/stderr"},
		Mount{Kind: KindSymlink, Src: "pts/ptmx", Dst: "/dev/ptmx"},
		Mount{Kind: KindDir, Dst: "/dev/shm", Mode: 0o755},
		Mount{Kind: KindDir, Dst: "/dev/pts", Mode: 0o755},
		Mount{Kind: KindRemountRO, Dst: "/dev"},
		Mount{Kind: KindTmpfs, Dst: "/dev/shm", Mode: 0o1777, Size: shmSize, Inodes: 4096, NoExec: true},
		Mount{Kind: KindDevpts, Dst: "/dev/pts", Data: devptsOptions},
	)
	return plan
}
