//go:build !sbx_lean

package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sbx-sandbox/sbx/audit"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/profiles"
	"github.com/sbx-sandbox/sbx/serve"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:            serveName,
		Usage:           serveUsage,
		Description:     serveDescription,
		OnUsageError:    usageError,
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: serve.DefaultListen, Usage: "`ADDR` to serve on: HOST:PORT, or unix:/PATH (a socket of mode 0660); not with a socket passed in LISTEN_FDS (systemd's sbx.socket), which is used instead"},
			&cli.StringFlag{Name: "token-file", Usage: "accept the bearer tokens in `FILE`: NAME:TOKEN lines (mode 0640 or less); else $SBX_TOKEN"},
			&cli.StringSliceFlag{Name: "profiles", Usage: "the profiles clients may use, `NAME|FILE,...`; the first is a request's default", DefaultText: strings.Join(append([]string{profiles.DefaultName}, others(profiles.Names(), profiles.DefaultName)...), ",")},
			&cli.IntFlag{Name: "max-concurrent", Value: runtime.NumCPU(), Usage: "`N` runs at once", DefaultText: fmt.Sprintf("the CPUs sbx may use, %d here", runtime.NumCPU())},
			&cli.StringSliceFlag{Name: "session-pool", Usage: "keep `PROFILE=N,...` sessions started ahead: POST /v1/sessions of that profile without limits or env takes one"},
			&cli.IntFlag{Name: "max-sessions", Value: serve.DefaultMaxSessions, Usage: "`N` sessions (POST /v1/sessions) may be open at once; past them 429"},
			&cli.IntFlag{Name: "queue", Value: -1, Usage: "`N` runs may wait for a worker; past them a request gets 429", DefaultText: "2 x --max-concurrent"},
			&cli.StringFlag{Name: "audit-log", Usage: "append one JSON line per run to `FILE` (fsync'd), with request_id, token name and metadata"},
			&cli.DurationFlag{Name: "drain-timeout", Value: serve.DefaultDrain, Usage: "on SIGTERM, how long runs in flight may go on before they are killed: `DURATION`"},
			&cli.DurationFlag{Name: "body-timeout", Value: serve.DefaultBodyTimeout, Usage: "how long a client may take to send its request body: `DURATION` (408 past it; it holds no worker meanwhile)"},
			&cli.Int64Flag{Name: "max-body", Value: serve.DefaultMaxBody, Usage: "largest request body: `BYTES` (413 past it)", DefaultText: "33554432, 32 MiB"},
			&cli.StringFlag{Name: "node-name", Usage: "this node's `NAME` behind a load balancer: every response says it in X-Sbx-Node, and its session ids start with it and a '-' (docs/deploy.md)", DefaultText: "the hostname"},
			&cli.StringSliceFlag{Name: "pool", Usage: "keep warm sandboxes ready: `PROFILE=N[:MAX],...` (N ready when idle, growing toward MAX under demand)"},
		},
		Action: serveAction,
	}
}

// serveAction is flags in, a server out, until SIGTERM or SIGINT drains it.
func serveAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError(c, fmt.Errorf("unexpected argument %q", c.Args().First()), false)
	}
	fail := func(err error) error { return cli.Exit(err.Error(), nsjail.ExitSbxFailed) }
	cfg := serve.Config{
		Profiles:      c.StringSlice("profiles"),
		MaxConcurrent: c.Int("max-concurrent"),
		MaxSessions:   c.Int("max-sessions"),
		SessionPool:   map[string]int{},
		Queue:         c.Int("queue"),
		DrainTimeout:  c.Duration("drain-timeout"),
		MaxBody:       c.Int64("max-body"),
		BodyTimeout:   c.Duration("body-timeout"),
		NodeName:      c.String("node-name"),
	}
	if cfg.MaxConcurrent <= 0 {
		return fail(fmt.Errorf("--max-concurrent %d: must be 1 or more", cfg.MaxConcurrent))
	}
	if cfg.Queue < 0 {
		cfg.Queue = 2 * cfg.MaxConcurrent
	}
	cfg.Jobs, cfg.Breaker = opsConfig(c)
	if len(cfg.Profiles) == 0 {
		cfg.Profiles = append([]string{profiles.DefaultName}, others(profiles.Names(), profiles.DefaultName)...)
	}
	switch path, env := c.String("token-file"), os.Getenv("SBX_TOKEN"); {
	case path != "":
		toks, err := serve.ReadTokens(path)
		if err != nil {
			return fail(err)
		}
		cfg.Tokens = toks
	case env != "":
		cfg.Tokens = []serve.Token{{Name: "SBX_TOKEN", Secret: env}}
	}
	if path := c.String("audit-log"); path != "" {
		log, err := audit.Open(path)
		if err != nil {
			return fail(err)
		}
		defer log.Close()
		cfg.Audit = log
	}
	pools, err := serve.ParsePools(c.StringSlice("pool"))
	if err != nil {
		return fail(err)
	}
	cfg.Pools = pools
	for _, kv := range c.StringSlice("session-pool") {
		name, n, ok := strings.Cut(kv, "=")
		k, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil || k < 0 || k > 64 {
			return usageError(c, fmt.Errorf("--session-pool %q: want PROFILE=N, N from 0 to 64", kv), false)
		}
		cfg.SessionPool[name] = k
	}
	srv, err := serve.New(cfg)
	if err != nil {
		return fail(err)
	}
	ln, inherited, err := listener(c, len(cfg.Tokens) > 0)
	if err != nil {
		return fail(err)
	}
	addr := ln.Addr().String()
	if ln.Addr().Network() == "unix" {
		addr = "unix:" + addr
	}
	auth := fmt.Sprintf("%d bearer tokens", len(cfg.Tokens))
	if len(cfg.Tokens) == 0 {
		auth = "no token (anyone who can connect may run code)"
	}
	if inherited {
		auth += "; the socket passed in LISTEN_FDS"
	}
	warm := "no warm pool"
	if len(pools) > 0 {
		var ps []string
		for _, p := range pools {
			ps = append(ps, fmt.Sprintf("%s=%d:%d", p.Profile, p.Min, p.Max))
		}
		warm = "pools " + strings.Join(ps, ",")
	}
	fmt.Fprintf(os.Stderr, "sbx serve: listening on %s; profiles %s; %d at once, %d queued; %s; %s; node %s\n",
		addr, strings.Join(cfg.Profiles, ","), cfg.MaxConcurrent, cfg.Queue, warm, auth, srv.NodeName())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	ignoreSIGPIPE()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fail(err)
	case sig := <-sigs:
		fmt.Fprintf(os.Stderr, "sbx serve: %v: draining (at most %v)\n", sig, cfg.DrainTimeout)
		start := time.Now()
		srv.Drain()
		<-served
		fmt.Fprintf(os.Stderr, "sbx serve: drained in %v; bye\n", time.Since(start).Round(time.Millisecond))
	}
	// An inherited socket's path is the service manager's: it stays, so
	// that the next start of sbx.service finds it.
	if path, ok := strings.CutPrefix(addr, "unix:"); ok && !inherited {
		os.Remove(path)
	}
	return nil
}

// listener is the socket a service manager passed (LISTEN_FDS, systemd's
// sbx.socket), else --listen's. Both at once is an error: which one the
// operator meant cannot be told.
func listener(c *cli.Context, tokens bool) (ln net.Listener, inherited bool, err error) {
	act, err := serve.ReadActivation(os.Getenv, os.Getpid())
	if err != nil {
		return nil, false, err
	}
	if act.FDs == 0 {
		ln, err := serve.Listen(c.String("listen"), tokens)
		return ln, false, err
	}
	if c.IsSet("listen") {
		return nil, false, fmt.Errorf("--listen %s and a socket passed in LISTEN_FDS (socket activation): give one", c.String("listen"))
	}
	ln, err = serve.Inherited(act, tokens)
	return ln, true, err
}

// others is names without skip.
func others(names []string, skip string) []string {
	var out []string
	for _, n := range names {
		if n != skip {
			out = append(out, n)
		}
	}
	return out
}

// ignoreSIGPIPE keeps a server alive when the reader of its stderr is
// gone (a journal restarted, a terminal closed, a test's pipe dropped):
// Go ends a program with SIGPIPE when a write to fd 1 or 2 fails with
// EPIPE, unless the program asked for SIGPIPE with signal.Notify (os/signal,
// "SIGPIPE"). Without this, the drain's first log line killed the server
// in the middle of killing its sandboxes, and a v1 sandbox was left frozen
// until the next sbx's stale cleanup. Notify, not signal.Ignore: an
// ignored disposition is inherited across execve (signal(7)), and the
// runtime resets to SIG_DFL in a child only the signals it handles, so
// every process the server starts keeps the default. Log lines written
// after the reader is gone are lost; the audit log is a file and is not.
func ignoreSIGPIPE() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}
