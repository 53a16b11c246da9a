package serve

import (
	"context"
	"time"

	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/netproxy"
	"github.com/sbx-sandbox/sbx/nsjail"
	"github.com/sbx-sandbox/sbx/pool"
)

// The session pool: sessions started ahead (sandbox built, driver and
// interpreter up), per profile, so that POST /v1/sessions and its first
// cell cost no start. A pooled session is the profile as it is: a request
// with limits or env of its own starts one cold. Each pooled sandbox's own
// wall limit is the longest TTL (plus a minute): one that waited that long
// ends and is replaced; a claimed one ends at its session's TTL first.

// startSessionPool starts the pools of Config.SessionPool, filling in the
// background; a profile whose Config cannot be built has no pool (its
// sessions start cold) and the server says why.
func (s *Server) startSessionPool() {
	m := s.sess
	m.pool = pool.Set[*pooledSession]{}
	for name, n := range s.cfg.SessionPool {
		if n <= 0 {
			continue
		}
		ref, err := s.profileRef(name)
		// Claims go by the Config's profile name.
		profile := ""
		if err == nil {
			var cfg *engine.Config
			if cfg, err = engine.Build("check", engine.Request{Profile: ref}); err == nil {
				profile = cfg.Profile.Name
				cfg.Close()
			}
		}
		if err != nil {
			s.cfg.Log("--session-pool %s=%d: %v; its sessions start cold", name, n, err)
			continue
		}
		p, err := pool.New(pool.Config[*pooledSession]{
			Profile: name, Min: n,
			Start: func(ctx context.Context) (*pooledSession, error) {
				cfg, err := engine.Build(sessionID(m.route), engine.Request{Profile: ref})
				if err != nil {
					return nil, err
				}
				job := cfg.Job(nsjail.Payload{}, engine.Options{})
				job.Timeout = MaxSessionTTL + time.Minute
				// Each pooled session has its own proxy (network mode
				// "allow"), made with it: one proxy's log and budgets
				// are never two sessions'.
				ss, proxy, err := engine.StartSession(ctx, cfg, job)
				if err != nil {
					cfg.Close()
					return nil, err
				}
				return &pooledSession{Session: ss, cfg: cfg, proxy: proxy}, nil
			},
		})
		if err != nil {
			s.cfg.Log("--session-pool %s=%d: %v; its sessions start cold", name, n, err)
			continue
		}
		m.pool[profile] = p
	}
}

// pooledSession is a session started ahead with the Config it was built
// from: the Config holds its image's lock (engine.Config.Close), which
// must outlive the sandbox, so that whoever ends the session (the pool,
// or the session it was claimed for: sessions.finish) releases both.
type pooledSession struct {
	*nsjail.Session
	cfg *engine.Config
	// proxy is the session's egress proxy, nil with the network off;
	// the sandbox's teardown closes it.
	proxy *netproxy.Proxy
}

// Close destroys the sandbox, then releases its Config.
func (ps *pooledSession) Close() error {
	err := ps.Session.Close()
	ps.cfg.Close()
	return err
}
