package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/sbx-sandbox/sbx/engine"
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
	m.pool = pool.Set[*nsjail.Session]{}
	for name, n := range s.cfg.SessionPool {
		if n <= 0 {
			continue
		}
		ref, err := s.profileRef(name)
		if err == nil {
			_, err = engine.Build("check", engine.Request{Profile: ref})
		}
		if err != nil {
			s.cfg.Log("--session-pool %s=%d: %v; its sessions start cold", name, n, err)
			continue
		}
		p, err := pool.New(pool.Config[*nsjail.Session]{
			Profile: name, Min: n,
			Start: func(ctx context.Context) (*nsjail.Session, error) {
				cfg, err := engine.Build(m.route+"-"+newID(), engine.Request{Profile: ref})
				if err != nil {
					return nil, err
				}
				if cfg.Proxy != nil {
					return nil, fmt.Errorf("profile %s: sessions do not support network mode %q yet", cfg.Profile.Name, "allow")
				}
				job := cfg.Job(nsjail.Payload{}, engine.Options{})
				job.Timeout = MaxSessionTTL + time.Minute
				return nsjail.StartSession(ctx, job)
			},
		})
		if err != nil {
			s.cfg.Log("--session-pool %s=%d: %v; its sessions start cold", name, n, err)
			continue
		}
		// Claims go by the Config's profile name.
		cfg, _ := engine.Build("check", engine.Request{Profile: ref})
		m.pool[cfg.Profile.Name] = p
	}
}
