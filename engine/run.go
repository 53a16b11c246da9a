package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sbx-sandbox/sbx/audit"
	"github.com/sbx-sandbox/sbx/netproxy"
	"github.com/sbx-sandbox/sbx/nsjail"
)

// Starter hands out a sandbox a warm pool started ahead of time for a Job
// of the same Config (sbx serve --pool: the pool's Claim, the Job's
// Payload.Lower set to what the request lowers), or nil and no error: no
// sandbox is ready or fits, and the run goes cold (nsjail.Run). A Starter
// must not wait for a sandbox to be built.
type Starter func(ctx context.Context, job *nsjail.Job) (*nsjail.Sandbox, error)

// Options are where one run's stdio goes and what the caller adds; all
// optional.
type Options struct {
	// Stdin is copied to the payload's stdin; nil gives it an empty one.
	Stdin io.Reader
	// Stdout and Stderr, when set, get the payload's output live.
	Stdout, Stderr io.Writer
	// OutputDir receives the files the run created or changed.
	OutputDir string
	// Signals received by the caller are forwarded to the payload.
	Signals <-chan os.Signal
	// Timings, T0 and Marks are nsjail.Job's (--debug-timings).
	Timings io.Writer
	T0      int64
	Marks   []nsjail.Mark
	// HugeHeapInit is nsjail.Job's: a one-shot run's init trades ~1.2
	// MB for fewer page faults (internal/leanexec).
	HugeHeapInit bool
	// Start, when set, builds the sandbox (a warm pool's Claim); nil
	// runs cold with nsjail.Run, which checks the payload and opens its
	// inputs before anything is built.
	Start Starter
}

// Job is the nsjail.Job of cfg for payload p.
func (cfg *Config) Job(p nsjail.Payload, o Options) *nsjail.Job {
	if cfg.Profile != nil && cfg.Profile.CaptureFigures {
		// Within the output cap, as the streams are (the supervisor
		// keeps it at most nsjail.MaxFigureBytes).
		p.FigureBytes = cfg.Host.Output
	}
	return &nsjail.Job{
		Spec:        cfg.Spec,
		Payload:     p,
		Stdin:       o.Stdin,
		Stdout:      o.Stdout,
		Stderr:      o.Stderr,
		OutputLimit: cfg.Host.Output,
		Timeout:     cfg.Host.Wall,
		OutputDir:   o.OutputDir,
		Limits:      cfg.Host.Cgroup,
		Signals:     o.Signals,
		Timings:     o.Timings,
		T0:          o.T0,
		Marks:       o.Marks,
		// No live stream: the output is in the Result, which is what
		// the caller prints (exec --json) or sends (serve).
		WarmResultJSON: o.Stdout == nil && o.Stderr == nil,
		HugeHeapInit:   o.HugeHeapInit,
	}
}

// Run runs payload p under cfg and returns its Result: the egress proxy
// when the network is on (its attempts, summary and warnings go into the
// Result here, not in the callers), the sandbox, and cfg's warnings
// before the run's own, and the image and interpreter it ran on. It
// always returns a Result; a failure of sbx is StatusSetupError.
func Run(ctx context.Context, cfg *Config, p nsjail.Payload, o Options) *nsjail.Result {
	job := cfg.Job(p, o)
	var proxy *netproxy.Proxy
	if cfg.Proxy != nil {
		var err error
		if proxy, err = NewProxy(cfg.Proxy); err != nil {
			return nsjail.SetupFailure(cfg.ID, cfg.Profile.Name, err)
		}
		job.Proxy = proxy
	}
	var res *nsjail.Result
	if o.Start == nil {
		res = nsjail.Run(ctx, job)
	} else {
		res = runStarted(ctx, job, o.Start)
	}
	res.Warnings = append(append([]string{}, cfg.Warnings...), res.Warnings...)
	annotate(res, cfg, p)
	if proxy != nil {
		addProxyReport(res, proxy)
	}
	return res
}

// runStarted is Run's path through a Starter: a sandbox it hands out is
// Exec'd and Closed, and the Result says it was pooled; without one the
// run is cold.
func runStarted(ctx context.Context, job *nsjail.Job, start Starter) *nsjail.Result {
	sb, err := start(ctx, job)
	if err != nil {
		return nsjail.SetupFailure(job.Spec.ID, job.Spec.Profile, err)
	}
	if sb == nil {
		return nsjail.Run(ctx, job)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, job.Payload, nsjail.IO{Stdin: job.Stdin, Stdout: job.Stdout, Stderr: job.Stderr, OutputDir: job.OutputDir, Timings: job.Timings})
	if err != nil {
		return nsjail.SetupFailure(job.Spec.ID, job.Spec.Profile, err)
	}
	res.Pooled = true
	return res
}

// NewProxy is the host side of network mode "allow".
func NewProxy(c *ProxyConfig) (*netproxy.Proxy, error) {
	return netproxy.New(netproxy.Config{
		Allow:        c.Allow,
		Resolve:      c.Resolve,
		MaxConns:     c.MaxConns,
		MaxBytesUp:   c.MaxBytesUp,
		MaxBytesDown: c.MaxBytesDown,
		IdleTimeout:  c.IdleTimeout,
	})
}

// addProxyReport puts what the proxy saw into the Result.
func addProxyReport(res *nsjail.Result, proxy *netproxy.Proxy) {
	res.Network = proxy.Attempts()
	sum := proxy.Summary()
	res.NetworkSummary, res.NetworkTruncated = &sum, sum.Truncated()
	if sum.Dropped > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("network: %d more attempts were not recorded (the log keeps %d records, %d KiB)",
			sum.Dropped, netproxy.MaxAttempts, netproxy.MaxAttemptBytes>>10))
	}
	if u := proxy.Unforwarded(); len(u) > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("network: %d allowlisted names have no address of their own (the run keeps at most %d transparent listeners), so they are reachable through the proxy variables only, starting with %s",
			len(u), netproxy.MaxForwards, u[0]))
	}
	if sum.DNS.RateLimited > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("network: %d DNS queries were dropped unanswered: the stub's rate limit (%d at once, then %g a second) or its %d TCP connections",
			sum.DNS.RateLimited, netproxy.DefaultDNSBurst, netproxy.DefaultDNSRate, netproxy.MaxDNSStreams))
	}
	if sum.RateLimited > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("network: %d connections were closed unread: refused requests went past the proxy's rate limit (%d at once, then %g a second)",
			sum.RateLimited, netproxy.DefaultRefusalBurst, netproxy.DefaultRefusalRate))
	}
}

// Who says who asked for a run, for its audit line (sbx serve).
type Who struct {
	// RequestID is the server's id of the request.
	RequestID string
	// Token is the name of the bearer token the request came with.
	Token string
	// Metadata is the request's free-form object, kept as sent.
	Metadata json.RawMessage
}

// Audit appends res's line to log: the code run is identified by the
// script's hash when there is one, else by the hash of the command line.
// cfg is nil for a run that failed before its Config was built.
func Audit(log *audit.Log, cfg *Config, res *nsjail.Result, p nsjail.Payload, withOutput bool, who Who) error {
	e := audit.FromResult(res, withOutput)
	e.Argv = p.Argv
	if e.Argv == nil {
		e.Argv = []string{}
	}
	if cfg != nil {
		e.ProfileSHA256 = cfg.ProfileSHA256()
	}
	e.CodeSHA256 = sha256Hex([]byte(strings.Join(p.Argv, "\x00")))
	if len(p.Argv) > 1 && p.Argv[0] == "python3" {
		for _, in := range res.Inputs {
			if in.Path == p.Argv[1] {
				e.CodeSHA256 = in.SHA256
			}
		}
	}
	e.RequestID, e.Token, e.Metadata = who.RequestID, who.Token, who.Metadata
	return log.Write(e)
}
