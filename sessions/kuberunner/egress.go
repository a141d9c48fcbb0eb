package kuberunner

import (
	"context"
	"maps"
	"net"

	"github.com/warrenhq/warren/sandbox/kube"
	"github.com/warrenhq/warren/sandbox/netproxy"
)

// ServeEgress serves warren's egress proxy px to the runners of sbs's
// pods on ln (serve http --kube-proxy-listen): each connection whose
// runner's certificate names a session is served by that session's proxy
// state, with its allowlist, limits and log, exactly as a local jail's
// connections are (netproxy.Session.ServeConn). A session whose proxy
// state does not exist (not in allowlist mode, deleted, or its shell not
// started since this server started) has its connections closed. It
// returns when ln fails.
func ServeEgress(ctx context.Context, sbs *kube.Sandboxes, px *netproxy.Proxy, ln net.Listener) error {
	cfg, err := sbs.EgressTLS(ctx)
	if err != nil {
		return err
	}
	return sbs.ServeEgress(ln, cfg, func(id string, c net.Conn) {
		ps := px.Lookup(id)
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
