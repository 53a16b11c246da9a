// Package nsjail builds a sandbox and runs one payload in it: the
// supervisor (host side: run.go, sandbox.go, limits.go, finish.go, ...)
// and the init it execs as pid 1 of the sandbox's namespaces
// (init_linux.go and the steps it calls). The init is sbx-init
// (cmd/sbx-init: this package built with -tags sbx_init_only and no cgo,
// which leaves out filter_compile.go, the supervisor's libseccomp half),
// embedded in sbx and exec'd from a sealed memfd (internal/initbin); in
// a build without it (a plain go build, a test binary), the supervisor
// re-executes /proc/self/exe.
//
// File names tell the two sides apart: init_*_linux.go runs only in the
// init, one concern to a file (init_mount_linux.go the mount plan,
// init_caps_linux.go capabilities and securebits, init_rlimits_linux.go the
// rlimit table, init_userns_linux.go the nested-userns limit,
// init_seccomp_linux.go the filter and its listener, init_egress_linux.go
// the DNS stub's and the forwards' sockets, init_warm_linux.go the waiting
// interpreter, ...). Every other file is the supervisor's (egress_linux.go
// serves what init_egress_linux.go opens; landlock_layer_linux.go reports
// what init_landlock_linux.go enforces), or shared by both (wire.go, the
// control and status codec; confine.go).
//
// The contract types (Spec, Payload, Result and what they hold) are
// defined in nsjail/spec, which builds without cgo; the names here are
// aliases of those (contract.go).
//
// # Phases
//
// A Sandbox lives through the phases of Phase, in order, once:
//
//	Start ──► PhaseStarting ──► PhaseReady ──Exec──► PhaseRunning ──► PhaseReporting ──► PhaseClosed
//	          namespaces,        confined,           payload in,      payload gone,      Close, or the
//	          cgroup, mounts,    waiting (no         started, timed   workspace          end of Exec:
//	          caps, seccomp      timer runs)                          report crosses     killed, destroyed
//
// Run is Start, Exec and Close back to back. A sandbox serves exactly one
// payload: a second Exec is ErrUsed.
//
// # Wire protocol
//
// The supervisor writes the control pipe (fd 3 of the init); the init
// answers with status lines on fd 4 and the workspace report on fd 5
// (with a proxy, fd 6 carries its listening socket). Every control and
// status message is one JSON line, within a cap of its own, decoded
// strictly (decodeStrict: no unknown field at any depth, nothing after
// the object). A control line is a ctlMsg, a union whose kind names its
// one body (spec, confine, payload, control); encodeCtl writes it and the
// init reads each with expect(kind), in the fixed order below, so a
// message out of place fails closed. A status line is a StatusMsg of a
// known kind (decodeStatus). One frame is not JSON: the Confine's BPF
// programs follow its line raw, their sizes given in it (wire.go, the
// programs' frame). Drawn the way runc's libcontainer/sync.go
// draws its own, with each line's kind:
//
//	supervisor (Start)                               init (pid 1)
//	  clone, exec sbx-init ─────────────────────────► runtime up, signals ignored, not dumpable
//	  ── spec: Spec (≤ 1 MiB) ──────────────────────► expect(spec)
//	  (compile filter; make cgroup, v1: attach        mounts, pivot_root, hostname, lo,
//	   the init beside its set-up)                    proxy listener ══fd 6══► supervisor,
//	                                                  user.* quotas (/proc/sys), mask /proc
//	  ── confine: filter, late rlimits (≤ 1 MiB), ──► expect(confine)
//	     then its two BPF programs, raw (≤ 32 KiB each)
//	                                                  RLIMIT_CORE, caps, securebits,
//	                                                  no_new_privs, Landlock, seccomp
//	  ◄─────────────────────── ready (≤ 256 KiB) ─── (confined from here on)
//	  wait for the cgroup attach; Start returns
//	                      ... the sandbox waits, confined ...
//	supervisor (Exec)
//	  ── payload: Payload (≤ 16 MiB), then ────────► expect(payload), write inputs
//	     the input files' bytes, raw                  fork+exec (held at setsid for the
//	                                                  payload's rlimits)
//	  ◄─────────────────────────────────── started ── payload runs; timers start
//	  ── control: signal or kill (≤ 256 B) ────────► expect(control) in a loop: forwarded
//	                                                  to the payload; EOF or anything
//	                                                  else kills the sandbox
//	  ◄────────────────────────────────────── exit ── payload reaped, leftovers killed
//	  ◄══════════════════════════ workspace report ══ fd 5 (bounded stream)
//	  init reaped: Result                             exit
//
// A step that fails sends an error line (its name, path and errno) and
// the init exits; a warning line may come at any time after ready.
// Nothing goes on the control pipe before the Payload but the Spec and
// the Confine: the supervisor holds signals that arrive earlier until the
// Payload is on its way. Run (sbx exec), whose payload is known before the
// sandbox exists, writes the Payload and its inputs right after the
// Confine, once the init is in its cgroup (writeSetup): the init reads it
// as soon as it is confined, without waiting for "ready" to be seen and
// answered; the order on the pipe is the same.
//
// A warm sandbox (Spec.Warm, init_warm_linux.go) differs in three places: the
// Confine waits for the cgroup attach (v1); after the seccomp load the
// init forks the interpreter (held and limited at its setsid), which
// imports the preload and says "ready" on a socketpair, and the init
// empties the workspace, /tmp and /dev/shm before its own ready; at the
// Payload, instead of fork+exec, it prlimits the lowered rlimits onto the
// interpreter and writes argv and the environment to the socket, and
// "started" follows that handoff. An interpreter that dies while it waits
// ends the init with an error line.
package nsjail
