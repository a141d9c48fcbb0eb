package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/sandbox/kube"
	"github.com/warrenhq/warren/sandbox/netproxy"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/kuberunner"
)

// runnerFlags choose where serve http runs sessions: in bwrap jails on this
// host, or in Kubernetes sandboxes (docs/kubernetes.md).
func runnerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "runner", Value: "local", Usage: "where sessions run: local (a bwrap jail on this host per session) or kubernetes " +
			"(an agent-sandbox Sandbox per session, its runner reached over mutual TLS; see docs/kubernetes.md)"},
		&cli.StringFlag{Name: "kube-namespace", Usage: "--runner kubernetes: the namespace of the sessions' Sandboxes and Secrets (default: the namespace warren's pod runs in)"},
		&cli.StringFlag{Name: "kube-template", Value: "warren-session", Usage: "--runner kubernetes: the SandboxTemplate every session's Sandbox is made from"},
		&cli.StringFlag{Name: "kube-warm-pool", Usage: "--runner kubernetes: a SandboxWarmPool to claim sessions' sandboxes from instead of making them cold"},
		&cli.IntFlag{Name: "kube-runner-port", Value: kube.DefaultPort, Usage: "--runner kubernetes: the port the runner listens on in a session's pod (the template's)"},
		&cli.StringFlag{Name: "kube-proxy-listen", Usage: "--runner kubernetes: serve warren's egress proxy to the sessions' pods on this address (e.g. 0.0.0.0:7071), " +
			"over TLS 1.3 with the runners' certificates: sessions in network mode allowlist (needs --kube-proxy-addr)"},
		&cli.StringFlag{Name: "kube-proxy-addr", Usage: "--runner kubernetes: the address the sessions' pods dial for --kube-proxy-listen, IP:PORT " +
			"(the warren Service's cluster IP and proxy port: pods have no DNS)"},
		&cli.StringFlag{Name: "kubeconfig", Usage: "--runner kubernetes: the kubeconfig file of the cluster (default: the pod's service account when warren runs in the cluster, else $KUBECONFIG)"},
	}
}

// inClusterNamespace is where a pod's service account says its namespace is.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// kubeSessions sets cfg up for --runner kubernetes, or leaves it for local
// jails. The cluster is not read here: sessions reach it as they are made
// and used, and warren's certificate authority is made or read now.
//
// With --kube-proxy-listen it serves warren's egress proxy to the pods
// there until stop is called: each connection is served by the session's
// proxy state as the manager mgr holds (once set) gives it (ProxyFor).
func kubeSessions(c *cli.Context, cfg *sessions.Config, mgr *atomic.Pointer[sessions.Manager], log zerolog.Logger) (stop func(), err error) {
	stop = func() {}
	switch c.String("runner") {
	case "", "local":
		for _, f := range []string{"kube-namespace", "kube-warm-pool", "kubeconfig", "kube-proxy-listen", "kube-proxy-addr"} {
			if c.IsSet(f) {
				return stop, cli.Exit("--"+f+" is for --runner kubernetes", 2)
			}
		}
		return stop, nil
	case "kubernetes":
	default:
		return stop, cli.Exit(fmt.Sprintf("--runner %q: want local or kubernetes", c.String("runner")), 2)
	}
	if c.String("workspace") != "" {
		return stop, cli.Exit("--workspace binds a directory of this host, and with --runner kubernetes sessions run in pods: leave it out", 2)
	}
	proxyListen, proxyAddr := c.String("kube-proxy-listen"), c.String("kube-proxy-addr")
	if (proxyListen == "") != (proxyAddr == "") {
		return stop, cli.Exit("--kube-proxy-listen and --kube-proxy-addr go together: where warren serves its egress proxy, and the address pods dial for it", 2)
	}
	ns := c.String("kube-namespace")
	if ns == "" {
		b, err := os.ReadFile(inClusterNamespace)
		if err != nil {
			return stop, cli.Exit("--runner kubernetes: name the sessions' namespace with --kube-namespace (warren is not in a pod, whose namespace it would take)", 2)
		}
		ns = strings.TrimSpace(string(b))
	}
	api, err := connectKube(c.String("kubeconfig"))
	if err != nil {
		return stop, cli.Exit("--runner kubernetes: "+err.Error(), 2)
	}
	sbs, err := kube.New(api, kube.Config{Namespace: ns, Template: c.String("kube-template"), WarmPool: c.String("kube-warm-pool"),
		Port: c.Int("kube-runner-port"), EgressProxy: proxyAddr})
	if err != nil {
		return stop, cli.Exit("--runner kubernetes: "+err.Error(), 2)
	}
	ctx, cancel := context.WithTimeout(c.Context, time.Minute)
	defer cancel()
	if err := sbs.Prepare(ctx); err != nil {
		return stop, fmt.Errorf("--runner kubernetes: prepare the runners' certificate authority in namespace %s: %w", ns, err)
	}
	runnerReady.name, runnerReady.check = "Kubernetes API answers", sbs.Reachable
	if c.String("database") == "" {
		// Decided: a warning, not a refusal. One replica whose data
		// directory is on a persistent volume works with SQLite; replicas
		// need PostgreSQL (docs/kubernetes.md).
		log.Warn().Str("database", "sqlite").Msg("--runner kubernetes keeps its state in SQLite on this server's disk: " +
			"run one replica only, with the data directory on a persistent volume, or pass --database postgres://… (env WARREN_DATABASE)")
	}
	px := cfg.Network.Proxy
	kuberunner.Configure(cfg, sbs)
	if proxyListen != "" {
		ln, err := net.Listen("tcp", proxyListen)
		if err != nil {
			return stop, cli.Exit("--kube-proxy-listen: "+err.Error(), 2)
		}
		cfg.Network.Proxy = px
		go func() {
			lookup := func(ctx context.Context, id string) *netproxy.Session {
				if m := mgr.Load(); m != nil {
					return m.ProxyFor(ctx, id)
				}
				return nil // not serving yet
			}
			err := kuberunner.ServeEgress(context.Background(), sbs, lookup, ln)
			if !errors.Is(err, net.ErrClosed) {
				log.Error().Err(err).Msg("the egress proxy for pods stopped: sessions in allowlist mode have no network")
			}
		}()
		stop = func() { ln.Close() }
		log.Info().Str("listen", ln.Addr().String()).Str("pods_dial", proxyAddr).Msg("egress proxy served to the sessions' pods")
	}
	log.Info().Str("namespace", ns).Str("template", c.String("kube-template")).Str("warm_pool", c.String("kube-warm-pool")).
		Msg("sessions run in Kubernetes sandboxes")
	return stop, nil
}

// connectKube reaches the cluster: the kubeconfig named, else the pod's
// service account, else $KUBECONFIG.
func connectKube(kubeconfig string) (kube.API, error) {
	if kubeconfig != "" {
		return kube.Connect(kubeconfig)
	}
	api, err := kube.Connect("")
	if err == nil {
		return api, nil
	}
	if env := os.Getenv("KUBECONFIG"); env != "" {
		return kube.Connect(env)
	}
	return nil, fmt.Errorf("%w, or set $KUBECONFIG", err)
}
