package main

import (
	"database/sql"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/netproxy"
	"github.com/warrenhq/warren/sessions"
)

// networkFileConfig is the "network" section of the config file.
type networkFileConfig struct {
	// Default is the policy of sessions created without one.
	Default sessions.Network `json:"default"`
	// AllowHost lets every client, HTTP ones included, give a session the
	// server's whole network (same as --allow-host-network).
	AllowHost bool `json:"allow_host,omitempty"`
	// Presets add or replace named groups of hosts.
	Presets map[string][]string `json:"presets,omitempty"`
	// AllowRanges are private or local ranges the proxy may reach anyway
	// (a package mirror on the LAN), e.g. "10.1.2.0/24".
	AllowRanges []string `json:"allow_ranges,omitempty"`
	// Hosts pin names to addresses the operator vouches for; they are
	// resolved without DNS and exempt from the address checks.
	Hosts map[string]string `json:"hosts,omitempty"`
	// MaxConnections caps each session's open upstream connections.
	MaxConnections int `json:"max_connections,omitempty"`
	// MaxBytes caps the bytes each session moves through the proxy while
	// the server runs, e.g. "2G".
	MaxBytes string `json:"max_bytes,omitempty"`
	// IdleTimeout closes tunnels idle this long, e.g. "5m".
	IdleTimeout string `json:"idle_timeout,omitempty"`
}

// proxyHint tells a refused client how to change the allowlist.
const proxyHint = `session_control {"action": "network", "network": {"mode": "allowlist", "allow": [...]}} ` +
	`or 'warren shell --network-allow ...'`

// networkConfig builds the session manager's network policy from the
// config file: the proxy and, with a database, the decision log.
func networkConfig(cfg *config, db *sql.DB, allowHost bool, log zerolog.Logger) (sessions.NetworkConfig, func(), error) {
	nc := cfg.Network
	opts, err := proxyOptions(nc)
	if err != nil {
		return sessions.NetworkConfig{}, nil, fmt.Errorf("config %s: network: %w", cfg.path, err)
	}
	presets := mergedPresets(nc.Presets)
	out := sessions.NetworkConfig{Presets: presets, Default: nc.Default,
		AllowHost: allowHost || nc.AllowHost}
	if db != nil {
		out.Log = sessions.NewNetLog(db)
	}
	opts.Presets = presets
	opts.OnDecision = func(d netproxy.Decision) {
		ev := log.Debug()
		if !d.Allowed {
			ev = log.Info()
		}
		ev.Str("session", d.Session).Str("host", d.Host).Uint16("port", d.Port).Bool("allowed", d.Allowed).
			Str("reason", d.Reason).Int64("bytes_up", d.BytesUp).Int64("bytes_down", d.BytesDown).Msg("network")
		if out.Log != nil {
			out.Log.Add(d)
		}
	}
	out.Proxy = netproxy.New(opts)
	stop := func() {
		out.Proxy.Close()
		if out.Log != nil {
			out.Log.Close()
		}
	}
	return out, stop, nil
}

func proxyOptions(nc networkFileConfig) (netproxy.Options, error) {
	opts := netproxy.Options{MaxConns: nc.MaxConnections, Hint: proxyHint}
	for _, r := range nc.AllowRanges {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			return opts, fmt.Errorf("allow_ranges: %q is not a CIDR range such as 10.1.2.0/24", r)
		}
		opts.AllowRanges = append(opts.AllowRanges, p.Masked())
	}
	for name, addr := range nc.Hosts {
		h, err := netproxy.ParseHost(name)
		if err != nil || h.Name == "" {
			return opts, fmt.Errorf("hosts: %q is not a host name", name)
		}
		ip, err := netip.ParseAddr(addr)
		if err != nil {
			return opts, fmt.Errorf("hosts: %s: %q is not an IP address", name, addr)
		}
		if opts.Hosts == nil {
			opts.Hosts = map[string]netip.Addr{}
		}
		opts.Hosts[h.Name] = ip
	}
	if nc.MaxBytes != "" {
		n, err := sessions.ParseBytes(nc.MaxBytes)
		if err != nil {
			return opts, fmt.Errorf("max_bytes: %w", err)
		}
		opts.MaxBytes = n
	}
	if nc.IdleTimeout != "" {
		d, err := time.ParseDuration(nc.IdleTimeout)
		if err != nil {
			return opts, fmt.Errorf("idle_timeout: %w", err)
		}
		opts.IdleTimeout = d
	}
	return opts, nil
}

func mergedPresets(extra map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range netproxy.DefaultPresets {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// networkFlags are the network options of 'session create' and 'shell'.
func networkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "network", Usage: "none (loopback only), allowlist (HTTP/HTTPS through warren's proxy to --network-allow) or host (the whole network)"},
		&cli.StringSliceFlag{Name: "network-allow", Usage: "allowlist: presets (npm, pypi, go, github, debian) and host patterns (registry.npmjs.org, *.example.com, host:8080); repeatable or comma-separated"},
	}
}

// networkFromFlags reads --network and --network-allow; nil when neither
// is given.
func networkFromFlags(c *cli.Context) *sessions.Network {
	mode, allow := c.String("network"), c.StringSlice("network-allow")
	if mode == "" && len(allow) == 0 {
		return nil
	}
	var items []string
	for _, a := range allow {
		for _, it := range strings.Split(a, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
	}
	return &sessions.Network{Mode: sessions.NetworkMode(mode), Allow: items}
}

// shellEgress serves 'warren shell --network-allow' from an in-process
// proxy; refusals are printed as they happen, so the human at the prompt
// sees at once why a download failed.
func shellEgress(c *cli.Context, p *sandbox.Profile, allow []string) (func(), error) {
	rules, err := netproxy.Expand(allow, nil)
	if err != nil {
		return nil, cli.Exit("--network-allow: "+err.Error(), 2)
	}
	errOut := c.App.ErrWriter
	px := netproxy.New(netproxy.Options{Hint: "restart warren shell with another --network-allow",
		OnDecision: func(d netproxy.Decision) {
			if !d.Allowed {
				fmt.Fprintln(errOut, plainText("[network] refused "+d.Target+": "+d.Reason))
			}
		}})
	s := px.Session("shell")
	s.SetAllow(rules)
	p.Egress = &sandbox.Egress{Attach: s.Attach}
	return px.Close, nil
}
