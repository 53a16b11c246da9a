package engine

import (
	"context"
	"time"

	"github.com/sbx-sandbox/sbx/netproxy"
	"github.com/sbx-sandbox/sbx/nsjail"
)

// CellEgressGrace is how long CellEgress waits, at a cell's end, for the
// connections the proxy still serves to end: a client that read its
// response and closed returns before the proxy files the record (its
// session goroutine sees the EOF a moment later), and without the wait
// that record would land in the next cell. Only a cell that leaves a
// connection open pays it (Execution.egress.open counts those).
const CellEgressGrace = 500 * time.Millisecond

// StartSession starts a session (nsjail.StartSession) on job, built from
// cfg by Config.Job. When cfg's network is on, the session gets an egress
// proxy of its own for its whole life: the sandbox's teardown closes it
// (nsjail's supervisor owns Job.Proxy from Start), whoever ends the
// session, and a restart of the interpreter keeps it, since the sandbox
// stays. The proxy is returned for CellEgress, nil with the network off.
// No two sessions ever share one.
func StartSession(ctx context.Context, cfg *Config, job *nsjail.Job) (*nsjail.Session, *netproxy.Proxy, error) {
	var proxy *netproxy.Proxy
	if cfg.Proxy != nil {
		var err error
		if proxy, err = NewProxy(cfg.Proxy); err != nil {
			return nil, nil, err
		}
		job.Proxy = proxy
	}
	ss, err := nsjail.StartSession(ctx, job)
	if err != nil {
		if proxy != nil {
			// A start that fails before the supervisor took the proxy
			// (the Spec's validation) would leave it; Close is idempotent.
			proxy.Close()
		}
		return nil, nil, err
	}
	return ss, proxy, nil
}

// CellEgress takes what proxy saw since the last take, for the cell that
// just ended: its attempts and their Summary, the way a one-shot Result
// has them (addProxyReport). It waits up to CellEgressGrace for open
// connections to end first. nil proxy: nil (the network is off).
func CellEgress(proxy *netproxy.Proxy) *nsjail.CellEgress {
	if proxy == nil {
		return nil
	}
	for deadline := time.Now().Add(CellEgressGrace); proxy.Open() > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	as, sum, open := proxy.Take()
	return &nsjail.CellEgress{Attempts: as, Summary: sum, Truncated: sum.Truncated(), Open: open}
}
