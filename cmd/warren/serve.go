package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/mcp"
	"github.com/warrenhq/warren/mcp/tokens"
	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/events"
	"github.com/warrenhq/warren/web"
)

func serveCommand() *cli.Command {
	common := func() []cli.Flag {
		return append(sessionFlags(),
			dataDirFlag(), databaseFlag(), configFlag(), tasksFlag(),
			&cli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "bind every default session to this directory (edits appear on disk)"},
			&cli.StringFlag{Name: "toolsets", Usage: "comma-separated toolsets to serve: " + strings.Join(mcp.Toolsets, ", ") + " (default all)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error (logs go to stderr)"},
			logFormatFlag(),
			metricsAddrFlag(),
			&cli.DurationFlag{Name: "shell-yield", Value: mcp.DefaultYield, Usage: "how long shell_exec and shell_wait wait for a command before returning it as a running job (keep it under your clients' request timeout)"},
		)
	}
	return &cli.Command{
		Name:   "serve",
		Usage:  "serve workspace sessions as MCP tools",
		Before: tuneGC,
		Subcommands: []*cli.Command{
			{
				Name:  "stdio",
				Usage: "serve one client on stdin/stdout (Claude Desktop, IDEs)",
				Description: "stdout carries nothing but JSON-RPC; logs go to stderr. The user is the local OS user.\n" +
					"With --workspace DIR the default session is bound to DIR.",
				Flags:  common(),
				Action: runServeStdio,
			},
			{
				Name:  "http",
				Usage: "serve MCP over streamable HTTP at /mcp (other agents, the web console)",
				Flags: append(append(common(),
					&cli.StringFlag{Name: "addr", Value: "127.0.0.1:7373", Usage: "address to listen on"},
					&cli.StringFlag{Name: "auth", Value: "token", Usage: "token (bearer tokens, see 'warren token') or none (loopback only, single local user)"},
					&cli.BoolFlag{Name: "allow-remote", Usage: "allow listening on a non-loopback address"},
					&cli.StringSliceFlag{Name: "allow-origin", Usage: "extra browser Origin allowed (scheme://host:port); repeatable"},
					&cli.StringFlag{Name: "console-dir", Usage: "serve the web console from this directory instead of the built-in one (development: 'just web-watch')"},
					&cli.IntFlag{Name: "max-conns-per-client", Value: mcp.DefaultConnsPerClient, Usage: "connections one client IP address may hold open before it authenticates (through a --trusted-proxy: requests in flight); more are answered 503; 0: no limit"},
					&cli.IntFlag{Name: "max-conns-per-user", Value: mcp.DefaultConnsPerUser, Usage: "connections one authenticated user may hold open (through a --trusted-proxy: requests in flight); more are answered 503; 0: no limit"},
					&cli.StringSliceFlag{Name: "trusted-proxy", Usage: "address or CIDR network of a reverse proxy in front of warren: X-Forwarded-For is read from it (and only from it) to limit its clients per address; repeatable"},
					&cli.DurationFlag{Name: "body-timeout", Value: mcp.DefaultBodyTimeout, Usage: "how long a request body may take to arrive (responses are not limited)"},
				), append(oauthFlags(), runnerFlags()...)...),
				Action: runServeHTTP,
			},
		},
	}
}

// services are what a serve command wires together.
type services struct {
	db       *sql.DB
	sessions *sessions.Manager
	work     *work
	server   *mcp.Server
	events   *events.Log
	log      zerolog.Logger
	dataDir  string
	stopNet  func()     // closes the egress proxy and writes its log
	tel      *telemetry // telemetry.go
}

func openServices(c *cli.Context) (*services, error) {
	log, err := newLogger(c)
	if err != nil {
		return nil, err
	}
	dir, err := dataDir(c)
	if err != nil {
		return nil, err
	}
	tel, err := startTelemetry(log)
	if err != nil {
		return nil, err
	}
	db, err := openDatabase(c, dir)
	if err != nil {
		tel.close(log)
		return nil, err
	}
	// A server killed before this one may have left cgroups (and their
	// limits) behind: sweep them now, not at this server's first jail.
	go sandbox.SweepStaleCgroups()
	store, err := sessions.NewStore(c.Context, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	mgr, stopNet, err := newSessionManager(c, store, db, dir, log)
	if err != nil {
		db.Close()
		return nil, err
	}
	w, err := openWork(c, db, dir, log)
	if err != nil {
		stopNet()
		db.Close()
		return nil, err
	}
	releaseClaimsOnEnd(mgr, w.board, log)
	if w.enforce {
		mgr.SetUsageCheck(usageCheck(w.meter, log))
	}
	if w.meter != nil {
		// Bytes through the egress proxy are usage too (kind network).
		meter := w.meter
		mgr.OnNetworkBytes(func(owner, session string, n int64) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := meter.Record(ctx, metering.Record{User: owner, Session: session, Client: "proxy",
				Kind: metering.KindNetwork, Bytes: n}); err != nil {
				log.Warn().Err(err).Str("session", session).Msg("record network bytes")
			}
		})
	}
	var toolsets []string
	if ts := c.String("toolsets"); ts != "" {
		toolsets = strings.Split(ts, ",")
	}
	runner, err := newAgentRunner(c, db, dir, mgr, w.meter)
	if err != nil {
		w.stop()
		stopNet()
		db.Close()
		return nil, err
	}
	activity, err := events.Open(c.Context, db, events.Options{Log: log})
	if err != nil {
		w.stop()
		stopNet()
		db.Close()
		return nil, err
	}
	purgeDeleted(c.Context, mgr, activity, log)
	git, err := openGit(c, db, dir, mgr, log)
	if err != nil {
		activity.Close()
		w.stop()
		stopNet()
		db.Close()
		return nil, err
	}
	forgetPushes(c.Context, mgr, activity, git, log)
	opts := mcp.Options{Sessions: mgr, Tasks: w.board, Meter: w.meter, Enforce: w.enforce, Events: activity, Toolsets: toolsets, Log: log, Version: buildVersion(),
		ShellYield: c.Duration("shell-yield"), Tracing: tel.stopTracing != nil, Git: git}
	if runner != nil && c.Command.Name != "chat" { // the chat's own server does not offer agent_run to its agent
		opts.Agent = runner
	}
	srv, err := mcp.New(opts)
	if err != nil {
		activity.Close()
		w.stop()
		stopNet()
		db.Close()
		return nil, err
	}
	if runner != nil {
		runner.srv = srv
	}
	svc := &services{db: db, sessions: mgr, work: w, server: srv, events: activity, log: log, dataDir: dir, tel: tel, stopNet: stopNet}
	if err := tel.serveMetrics(c, svc); err != nil {
		svc.close()
		return nil, err
	}
	return svc, nil
}

func (s *services) close() {
	defer s.tel.close(s.log) // last: the spans of the shutdown too
	s.server.Close()
	s.events.Close()
	s.work.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.sessions.Close(ctx); err != nil {
		s.log.Warn().Err(err).Msg("save sessions")
	}
	s.stopNet()
	s.db.Close()
}

func runServeStdio(c *cli.Context) error {
	svc, err := openServices(c)
	if err != nil {
		return err
	}
	defer svc.close()
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	user := sessions.LocalUser()
	svc.log.Info().Str("user", user).Str("workspace", c.String("workspace")).Msg("serving MCP on stdio")
	if isTerminal(os.Stdin) {
		stdioHint(os.Stderr, c.String("workspace"))
	}
	in, restore := pollableStdin(os.Stdin)
	defer restore()
	go trimWhenIdle(ctx)
	err = svc.server.ServeStdio(ctx, in, os.Stdout, user)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		// SIGTERM or Ctrl-C: asked to stop, not a failure (exit status 0,
		// as on EOF, which is what a service manager expects).
		svc.log.Info().Msg("stopped by a signal")
		return nil
	}
	return err
}

// mcpSessionTTL is how long an MCP session unused on every replica is
// kept: mcp-go's idle sweep of each replica's own (WithSessionIdleTTL).
const mcpSessionTTL = 30 * time.Minute

func runServeHTTP(c *cli.Context) error {
	addr := c.String("addr")
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: want host:port, e.g. 127.0.0.1:7373", addr)
	}
	loopback := mcp.IsLoopbackHost(host)
	if !loopback && !c.Bool("allow-remote") {
		return cli.Exit(fmt.Sprintf("refusing to listen on %s, which is not a loopback address: pass --allow-remote "+
			"if you mean to expose warren to the network (put TLS in front of it)", addr), 2)
	}
	authMode := c.String("auth")
	if authMode != "token" && authMode != "none" {
		return cli.Exit(fmt.Sprintf("--auth %q: want token or none", authMode), 2)
	}
	if authMode == "none" && !loopback {
		return cli.Exit("--auth none is only allowed on a loopback address: anyone who can reach the port would own your workspaces", 2)
	}
	svc, err := openServices(c)
	if err != nil {
		return err
	}
	defer svc.close()

	opts := mcp.HTTPOptions{LocalUser: sessions.LocalUser(), AllowedOrigins: c.StringSlice("allow-origin"), BodyTimeout: c.Duration("body-timeout"),
		Metrics: svc.tel.metrics, Ready: svc.tel.ready}
	if svc.sessions.ReplicaID() != "" { // replicas on PostgreSQL: MCP sessions continue on any of them
		opts.SharedSessions = sessions.NewMCPSessions(svc.db, mcpSessionTTL)
	}
	var firstToken string
	if authMode == "token" {
		if opts.Tokens, err = tokens.Open(c.Context, svc.db); err != nil {
			return err
		}
		defer func() { // before svc.close closes the database
			if err := opts.Tokens.Close(); err != nil {
				svc.log.Warn().Err(err).Msg("record the last use of tokens")
			}
		}()
		n, err := opts.Tokens.Active(c.Context)
		if err != nil {
			return err
		}
		if n == 0 {
			if firstToken, _, err = opts.Tokens.Create(c.Context, opts.LocalUser); err != nil {
				return err
			}
		}
	} else {
		svc.log.Warn().Str("user", opts.LocalUser).Msg("--auth none: every local process that can reach the port acts as " + opts.LocalUser)
	}

	consoleOpts := web.Options{AllowedOrigins: opts.AllowedOrigins, Dir: c.String("console-dir"), Log: svc.log}
	if opts.Tokens != nil {
		consoleOpts.Tokens = opts.Tokens
	}
	console, err := web.New(consoleOpts)
	if err != nil {
		return err
	}
	opts.Console = console
	if opts.OAuth, err = openOAuth(c, svc, authMode, console); err != nil { // serve_oauth.go
		return err
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	proxies, err := mcp.ParseTrustedProxies(c.StringSlice("trusted-proxy"))
	if err != nil {
		ln.Close()
		return cli.Exit(err.Error(), 2)
	}
	if c.Int("max-conns-per-client") < 0 || c.Int("max-conns-per-user") < 0 {
		ln.Close()
		return cli.Exit("--max-conns-per-client and --max-conns-per-user must be 0 (no limit) or more", 2)
	}
	limiter := mcp.NewConnLimiter(ln, mcp.ConnLimits{PerAddress: c.Int("max-conns-per-client"), PerUser: c.Int("max-conns-per-user"),
		TrustedProxies: proxies})
	ln, opts.Conns = limiter, limiter
	url := "http://" + ln.Addr().String() + "/mcp"
	// On stdout, never in the logs: the link signs a browser in.
	consoleURL := console.LoginURL("http://"+ln.Addr().String(), opts.LocalUser)
	if firstToken != "" {
		fmt.Fprintf(c.App.Writer, "warren: no token existed, so one was created for user %s; it is shown only once:\n\n"+
			"  URL:   %s\n  Token: %s\n\nSend it as 'Authorization: Bearer <token>'. Manage tokens with 'warren token'.\n",
			opts.LocalUser, url, firstToken)
	} else if authMode == "token" {
		fmt.Fprintf(c.App.Writer, "warren: serving MCP at %s\nClients send 'Authorization: Bearer <token>'; "+
			"make a token with '%s token create --user NAME --data-dir %s%s' (tokens are shown once; 'warren token ls' lists them).\n",
			url, os.Args[0], svc.dataDir, sameDatabase(c))
	} else {
		fmt.Fprintf(c.App.Writer, "warren: serving MCP at %s (no authentication: loopback only)\n", url)
	}
	if authMode == "token" {
		fmt.Fprintf(c.App.Writer, "Web console (the link signs one browser in as %s, once): %s\n", opts.LocalUser, consoleURL)
	} else {
		fmt.Fprintf(c.App.Writer, "Web console: %s\n", consoleURL)
	}
	if opts.OAuth != nil {
		printOAuth(c.App.Writer, opts.OAuth, c.String("oidc-issuer"))
	}
	svc.log.Info().Str("url", url).Str("auth", authMode).Msg("serving MCP over HTTP")

	hs := &http.Server{Handler: limiter.Handler(mcp.InstrumentHTTP(svc.server.HTTPHandler(opts))), ConnContext: limiter.ConnContext,
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		// A request's headers are small (a token, a session id, a trace
		// context): 64 KiB, not Go's default megabyte, held per request.
		MaxHeaderBytes: 64 << 10}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	go trimWhenIdle(ctx)
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
		svc.log.Info().Msg("shutting down")
		svc.server.Close() // interrupt running commands so that their requests end
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}
	return nil
}
