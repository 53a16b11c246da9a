//go:build !sbx_lean

package main

import (
	"github.com/urfave/cli/v2"

	"github.com/sbx-sandbox/sbx/serve"
)

// withOpsFlags adds to `sbx serve` the flags of what serve/ops.go adds
// around its runs: the async jobs' bounds and the circuit breaker. They
// live here, apart from serve_cmd.go's own, so that the two grow apart.
func withOpsFlags(cmd *cli.Command) *cli.Command {
	cmd.Flags = append(cmd.Flags,
		&cli.DurationFlag{Name: "job-ttl", Value: serve.DefaultJobTTL, Usage: "how long a finished async job (POST /v1/jobs) is kept: `DURATION`"},
		&cli.IntFlag{Name: "max-jobs", Value: serve.DefaultMaxJobs, Usage: "`N` async jobs kept at once; past it the oldest finished are dropped"},
		&cli.Int64Flag{Name: "max-job-bytes", Value: serve.DefaultMaxJobBytes, Usage: "events and Results of finished jobs kept, in all: `BYTES`; past it the oldest are dropped", DefaultText: "268435456, 256 MiB"},
		&cli.IntFlag{Name: "breaker-kills", Value: serve.DefaultBreakerKills, Usage: "a token whose runs a memory, pids or CPU time limit kills `N` times within --breaker-window gets 429 for --breaker-cooldown (-1: off)"},
		&cli.DurationFlag{Name: "breaker-window", Value: serve.DefaultBreakerWindow, Usage: "the circuit breaker's window: `DURATION`"},
		&cli.DurationFlag{Name: "breaker-cooldown", Value: serve.DefaultBreakerCooldown, Usage: "how long an open circuit breaker throttles its token: `DURATION`"},
	)
	return cmd
}

// opsConfig reads withOpsFlags' flags.
func opsConfig(c *cli.Context) (serve.JobsConfig, serve.BreakerConfig) {
	return serve.JobsConfig{TTL: c.Duration("job-ttl"), MaxJobs: c.Int("max-jobs"), MaxBytes: c.Int64("max-job-bytes")},
		serve.BreakerConfig{Kills: c.Int("breaker-kills"), Window: c.Duration("breaker-window"), Cooldown: c.Duration("breaker-cooldown")}
}
