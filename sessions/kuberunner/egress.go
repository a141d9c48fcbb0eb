package kuberunner

import (
	"context"
	"maps"
	"net"

	"github.com/warrenhq/warren/sandbox/kube"
	"github.com/warrenhq/warren/sandbox/netproxy"
)

// ServeEgress serves warren's egress proxy to the runners of sbs's pods
// on ln (serve http --kube-proxy-listen): each connection whose runner's
// certificate names a session is served by the proxy state lookup gives
// for it (the manager's ProxyFor), with the session's allowlist, limits
// and log, exactly as a local jail's connections are
// (netproxy.Session.ServeConn). A session lookup gives none for (not in
// allowlist mode, deleted, or unknown here) has its connections closed.
// It returns when ln fails.
func ServeEgress(ctx context.Context, sbs *kube.Sandboxes, lookup func(ctx context.Context, id string) *netproxy.Session, ln net.Listener) error {
	cfg, err := sbs.EgressTLS(ctx)
	if err != nil {
		return err
	}
	return sbs.ServeEgress(ln, cfg, func(id string, c net.Conn) {
		ps := lookup(ctx, id)
		if ps == nil {
			c.Close()
			return
		}
		ps.ServeConn(c)
	})
}

// withEnv returns env with extra added, without changing env.
func withEnv(env, extra map[string]string) map[string]string {
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, extra)
	return out
}
