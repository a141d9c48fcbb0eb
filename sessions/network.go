package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/netproxy"
)

// NetworkMode is how a session's jail reaches the network.
type NetworkMode string

// Network modes.
const (
	// NetNone gives the jail loopback only (the default).
	NetNone NetworkMode = "none"
	// NetAllowlist lets HTTP and HTTPS out through warren's proxy to the
	// hosts the allowlist names.
	NetAllowlist NetworkMode = "allowlist"
	// NetHost shares the host's whole network.
	NetHost NetworkMode = "host"
)

// Network is a session's network policy.
type Network struct {
	Mode NetworkMode `json:"mode"`
	// Allow lists presets (npm, pypi, go, github, debian) and host
	// patterns ("registry.npmjs.org", "*.example.com", "host:8080").
	Allow []string `json:"allow,omitempty"`
}

// NetworkConfig is the server's network policy.
type NetworkConfig struct {
	// Proxy serves allowlist sessions; nil makes allowlist mode
	// unavailable.
	Proxy *netproxy.Proxy
	// Presets name groups of hosts; nil means netproxy.DefaultPresets.
	Presets map[string][]string
	// Default is the policy of a session created without one.
	Default Network
	// AllowHost lets sessions use the host's network. Off for remote
	// users unless the operator turns it on.
	AllowHost bool
	// Unavailable, when set, says why modes host (when not allowed) and
	// allowlist (without a proxy) cannot be had, in place of the local
	// server's advice: runners elsewhere (pods) take other settings.
	Unavailable map[NetworkMode]string
	// Log stores proxy decisions for NetworkLog; nil keeps only the
	// proxy's in-memory log.
	Log *NetLog
}

// normalize checks a policy and returns it with its allowlist expanded
// into rules.
func (m *Manager) normalizeNetwork(n Network) (Network, []netproxy.Rule, error) {
	if n.Mode == "" {
		if len(n.Allow) > 0 {
			n.Mode = NetAllowlist
		} else {
			n.Mode = NetNone
		}
	}
	switch n.Mode {
	case NetNone:
		if len(n.Allow) > 0 {
			return n, nil, invalidf("network mode none takes no allowlist: use mode allowlist")
		}
		return Network{Mode: NetNone}, nil, nil
	case NetHost:
		if why := m.cfg.Network.Unavailable[NetHost]; why != "" && !m.cfg.Network.AllowHost {
			return n, nil, invalidf("%s", why)
		}
		if !m.cfg.Network.AllowHost {
			return n, nil, invalidf("network mode host (the server's whole network) is not allowed on this server; " +
				"use mode allowlist with the hosts you need, or ask its operator to start it with --allow-host-network")
		}
		return Network{Mode: NetHost}, nil, nil
	case NetAllowlist:
		if why := m.cfg.Network.Unavailable[NetAllowlist]; why != "" && m.cfg.Network.Proxy == nil {
			return n, nil, invalidf("%s", why)
		}
		if m.cfg.Network.Proxy == nil {
			return n, nil, invalidf("network mode allowlist is not available on this server (no egress proxy)")
		}
		rules, err := netproxy.Expand(n.Allow, m.cfg.Network.Presets)
		if err != nil {
			return n, nil, invalidf("%v", err)
		}
		allow := slices.Clone(n.Allow)
		slices.Sort(allow)
		return Network{Mode: NetAllowlist, Allow: slices.Compact(allow)}, rules, nil
	}
	return n, nil, invalidf("network mode %q: use none, allowlist or host", n.Mode)
}

// networkProfile applies s's network policy to its jail profile.
func (m *Manager) networkProfile(s *Session, p *sandbox.Profile) error {
	n := s.NetworkPolicy()
	switch n.Mode {
	case NetHost:
		if !m.cfg.Network.AllowHost {
			return fmt.Errorf("session %s uses the host's network, which this server does not allow: "+
				"change its network with session_control (action network)", s.ID)
		}
		p.Network = true
	case NetAllowlist:
		_, rules, err := m.normalizeNetwork(n)
		if err != nil {
			return fmt.Errorf("session %s: %w", s.ID, err)
		}
		ps := m.cfg.Network.Proxy.Session(s.ID)
		ps.SetAllow(rules)
		p.Egress = &sandbox.Egress{Attach: ps.Attach}
	}
	return nil
}

// NetworkPolicy returns s's network policy.
func (s *Session) NetworkPolicy() Network {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.network.Mode == "" {
		return Network{Mode: NetNone}
	}
	return Network{Mode: s.network.Mode, Allow: slices.Clone(s.network.Allow)}
}

// SetNetwork changes user's session's network policy. A new allowlist
// applies to the next connection at once; a new mode restarts the shell
// (with its cwd and exports) on the next command, and is refused while a
// command runs.
func (m *Manager) SetNetwork(ctx context.Context, user, id string, n Network) (*Session, error) {
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return nil, err
	}
	defer m.opLock(s.ID)()
	if st := s.State(); st != StateActive && st != StatePaused {
		return nil, &StateError{ID: s.ID, State: st, Action: "change the network of"}
	}
	n, rules, err := m.normalizeNetwork(n)
	if err != nil {
		return nil, err
	}
	old := s.NetworkPolicy()
	if old.Mode != n.Mode {
		if err := m.idleShell(ctx, s, "change the network mode of"); err != nil {
			return nil, err
		}
	}
	if err := m.store.saveNetwork(ctx, s.ID, n); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.network = n
	s.mu.Unlock()
	switch {
	case old.Mode != n.Mode:
		m.dropShell(s.ID, true) // the next shell gets the new profile
		if n.Mode != NetAllowlist && m.cfg.Network.Proxy != nil {
			m.cfg.Network.Proxy.Remove(s.ID)
		}
	case n.Mode == NetAllowlist:
		m.cfg.Network.Proxy.Session(s.ID).SetAllow(rules)
	}
	return s, nil
}

// NetworkLog returns the proxy's recent decisions for user's session,
// newest last, at most limit.
func (m *Manager) NetworkLog(ctx context.Context, user, id string, limit int) (*Session, []netproxy.Decision, error) {
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return nil, nil, err
	}
	if l := m.cfg.Network.Log; l != nil {
		l.Flush(ctx)
		d, err := m.store.networkLog(ctx, s.ID, limit)
		return s, d, err
	}
	var d []netproxy.Decision
	if p := m.cfg.Network.Proxy; p != nil {
		if ps := p.Lookup(s.ID); ps != nil {
			d = ps.Log()
		}
	}
	if limit > 0 && len(d) > limit {
		d = d[len(d)-limit:]
	}
	return s, d, nil
}

// forgetNetwork closes a session's proxy state (archive, delete).
func (m *Manager) forgetNetwork(id string) {
	if p := m.cfg.Network.Proxy; p != nil {
		p.Remove(id)
	}
}

func encodeNetwork(n Network) string {
	if n.Mode == "" || n.Mode == NetNone {
		return ""
	}
	b, _ := json.Marshal(n)
	return string(b)
}

func decodeNetwork(s string) (Network, error) {
	if s == "" {
		return Network{Mode: NetNone}, nil
	}
	var n Network
	err := json.Unmarshal([]byte(s), &n)
	return n, err
}

func (st *Store) saveNetwork(ctx context.Context, id string, n Network) error {
	_, err := st.db.ExecContext(ctx, `UPDATE sessions SET network = ?, updated_at = ? WHERE id = ?`,
		encodeNetwork(n), st.Now().UTC().UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("save network policy: %w", err)
	}
	return nil
}

// createNetwork picks the policy of a new session: the one asked for, or
// the server's default.
func (m *Manager) createNetwork(n *Network) (Network, error) {
	if n == nil {
		d := m.cfg.Network.Default
		if d.Mode == "" && len(d.Allow) == 0 {
			return Network{Mode: NetNone}, nil
		}
		n = &d
	}
	out, _, err := m.normalizeNetwork(*n)
	return out, err
}

// OnNetworkBytes has fn told, after the decision log is written, how many
// bytes each session moved through the egress proxy and whose session it
// is: the server meters them. Without a decision log nothing is counted.
func (m *Manager) OnNetworkBytes(fn func(owner, session string, bytes int64)) {
	l := m.cfg.Network.Log
	if l == nil {
		return
	}
	l.OnBytes = func(session string, n int64) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		owner, err := m.store.Owner(ctx, session)
		if err != nil {
			return
		}
		fn(owner, session, n)
	}
}

// ProxyFor returns session id's egress proxy state for a connection that
// reached this server from outside its jails (a Kubernetes pod's runner
// dials warren's Service, which may route it to any replica), or nil when
// the session has no allowlist to serve: deleted, archived, or in another
// mode. With replicas (leases), the allowlist is read from the database
// for each connection, so that a replica that does not drive the session,
// or did earlier and kept its proxy state, applies the allowlist as it is
// now, not as it was when its state was made. One server alone keeps its
// state current itself (SetNetwork), and serves what it holds.
func (m *Manager) ProxyFor(ctx context.Context, id string) *netproxy.Session {
	px := m.cfg.Network.Proxy
	if px == nil {
		return nil
	}
	if m.leases == nil {
		return px.Lookup(id)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	owner, err := m.store.Owner(ctx, id)
	if err != nil {
		return nil
	}
	s, err := m.store.Get(ctx, owner, id)
	if err != nil {
		return nil
	}
	if st := s.State(); st != StateActive && st != StatePaused {
		px.Remove(id)
		return nil
	}
	n := s.NetworkPolicy()
	if n.Mode != NetAllowlist {
		px.Remove(id)
		return nil
	}
	_, rules, err := m.normalizeNetwork(n)
	if err != nil {
		return nil
	}
	ps := px.Session(id)
	ps.SetAllow(rules)
	return ps
}
