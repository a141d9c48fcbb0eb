package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/agent/chat"
	"github.com/warrenhq/warren/agent/provider"
	"github.com/warrenhq/warren/agent/transcript"
	"github.com/warrenhq/warren/mcp"
	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
)

func chatFlags() []cli.Flag {
	return append(sessionFlags(), dataDirFlag(), databaseFlag(), configFlag(), tasksFlag(),
		&cli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Usage: "bind the default session to this directory (edits appear on disk; approvals default to ask)"},
		&cli.StringFlag{Name: "log-level", Value: "warn", Usage: "debug, info, warn or error (logs go to stderr)"},
		logFormatFlag(),
		&cli.DurationFlag{Name: "shell-yield", Value: mcp.DefaultYield, Usage: "how long a command runs before it is returned as a job"},
		&cli.StringFlag{Name: "toolsets", Usage: "toolsets of the embedded server (default all)"},
		&cli.StringFlag{Name: "model", EnvVars: []string{"WARREN_MODEL"}, Usage: "model name (default: the config's agent.model)"},
		&cli.StringFlag{Name: "base-url", EnvVars: []string{"OPENAI_BASE_URL"}, Usage: "OpenAI-compatible API root (default: the config's agent.base_url, else " + defaultBaseURL + ")"},
		&cli.StringFlag{Name: "server", Usage: "a remote 'warren serve http' URL (…/mcp) instead of the embedded server"},
		&cli.StringFlag{Name: "token-file", Usage: "file holding the bearer token for --server (else WARREN_TOKEN)"},
		&cli.StringFlag{Name: "session", Usage: "the session to work in (default: your default session)"},
		&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Usage: "run this prompt once, non-interactively"},
		&cli.StringFlag{Name: "output", Value: "text", Usage: "with -p: text (answer on stdout, progress on stderr), json or stream-json"},
		&cli.BoolFlag{Name: "continue", Aliases: []string{"c"}, Usage: "continue your latest chat"},
		&cli.StringFlag{Name: "resume", Usage: "continue chat ID"},
		&cli.StringFlag{Name: "fork", Usage: "start from a copy of chat ID: a new session whose workspace is a copy of that chat's session now, and a copy of its transcript"},
		&cli.StringFlag{Name: "task", Usage: "claim task T-N (or 'next': the first open task) for the session and work on it"},
		&cli.StringFlag{Name: "approval", Usage: "auto, ask (before destructive tools) or read-only (default: ask for bound sessions, auto otherwise)"},
		&cli.IntFlag{Name: "max-turns", Usage: "model calls per prompt (default 50)"},
		&cli.Int64Flag{Name: "max-tokens", Usage: "token budget of the chat (0: none)"},
		&cli.Float64Flag{Name: "max-cost", Usage: "cost budget of the chat in USD (0: none)"},
		&cli.StringSliceFlag{Name: "allow", Usage: "offer only these tools or toolsets (globs), repeatable"},
		&cli.StringSliceFlag{Name: "deny", Usage: "never offer these tools or toolsets (globs), repeatable"},
	)
}

func chatCommand() *cli.Command {
	return &cli.Command{
		Name:  "chat",
		Usage: "warren's own agent: an interactive chat in a session, or one prompt with -p",
		Description: "The model is any OpenAI-compatible endpoint (--base-url, --model); the key comes from OPENAI_API_KEY " +
			"or the config file's agent.api_key, never from the command line.\n" +
			"Exit codes with -p: 0 done, 1 error, 2 usage error, 3 turn limit, 4 budget, 5 approval needed without a terminal, 130 interrupted.",
		Flags:  chatFlags(),
		Action: runChat,
		Subcommands: []*cli.Command{
			{Name: "ls", Usage: "list your chats with tokens and cost", Flags: []cli.Flag{dataDirFlag(), databaseFlag(), configFlag()}, Before: inheritFlags, Action: runChatList},
			{Name: "export", Usage: "print a chat: export ID --format md|json", ArgsUsage: "ID",
				Flags:  []cli.Flag{dataDirFlag(), databaseFlag(), configFlag(), &cli.StringFlag{Name: "format", Value: "md", Usage: "md or json"}},
				Before: inheritFlags, Action: runChatExport},
			{Name: "doctor", Usage: "probe a model endpoint and store what it supports",
				Flags: []cli.Flag{dataDirFlag(), databaseFlag(), configFlag(),
					&cli.StringFlag{Name: "model", EnvVars: []string{"WARREN_MODEL"}, Usage: "model name"},
					&cli.StringFlag{Name: "base-url", EnvVars: []string{"OPENAI_BASE_URL"}, Usage: "OpenAI-compatible API root"}},
				Before: inheritFlags, Action: runChatDoctor},
		},
	}
}

// modelOf resolves the model, endpoint and key from flags, environment
// and config.
func modelOf(c *cli.Context, cfg *config) (model, baseURL, key string, err error) {
	model, baseURL, key = flagOf(c, "model"), flagOf(c, "base-url"), os.Getenv("OPENAI_API_KEY")
	if model == "" {
		model = cfg.Agent.Model
	}
	if baseURL == "" {
		baseURL = cfg.Agent.BaseURL
	}
	if baseURL == "" {
		baseURL = defaultBaseURL
	}
	if key == "" {
		key = cfg.Agent.APIKey
	}
	if model == "" {
		return "", "", "", cli.Exit("no model: pass --model NAME or set agent.model in "+cfg.path, exitUsage)
	}
	if key == "" && baseURL == defaultBaseURL {
		return "", "", "", cli.Exit("no API key: set OPENAI_API_KEY or agent.api_key in "+cfg.path, exitUsage)
	}
	return model, baseURL, key, nil
}

// inheritFlags gives a chat subcommand the flags given to 'warren chat'
// before it, unless it was given its own.
func inheritFlags(c *cli.Context) error {
	for _, name := range []string{"data-dir", "config", "model", "base-url"} {
		if c.String(name) == "" {
			if v := flagOf(c, name); v != "" {
				c.Set(name, v)
			}
		}
	}
	return nil
}

// flagOf reads a string flag given to this command or to a parent
// ('warren chat --model M doctor' and 'warren chat doctor --model M').
func flagOf(c *cli.Context, name string) string {
	for _, l := range c.Lineage() {
		if v := l.String(name); v != "" {
			return v
		}
	}
	return ""
}

// chatEnv is what a chat runs with.
type chatEnv struct {
	svc     *services // nil with --server
	store   *transcript.Store
	meter   *metering.Meter
	tools   *agent.Tools
	cfg     *config
	user    string
	session string
	mode    string // the session's mode, for the default approval
	dataDir string
	close   func()
}

func openChatEnv(c *cli.Context) (*chatEnv, error) {
	env := &chatEnv{user: sessions.LocalUser()}
	var closers []func()
	env.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*chatEnv, error) { env.close(); return nil, err }
	if url := c.String("server"); url != "" {
		dir, cfg, db, err := openData(c)
		if err != nil {
			return nil, err
		}
		env.dataDir = dir
		closers = append(closers, func() { db.Close() })
		env.cfg = cfg
		if env.meter, err = openMeter(c.Context, db, cfg, zerologNop()); err != nil {
			return fail(err)
		}
		if env.store, err = transcript.Open(c.Context, db); err != nil {
			return fail(err)
		}
		token := os.Getenv("WARREN_TOKEN")
		if f := c.String("token-file"); f != "" {
			b, err := os.ReadFile(f)
			if err != nil {
				return fail(fmt.Errorf("read --token-file: %w", err))
			}
			token = strings.TrimSpace(string(b))
		}
		if env.tools, err = agent.ConnectHTTP(c.Context, url, token, metering.ClientCLI); err != nil {
			return fail(err)
		}
		closers = append(closers, func() { env.tools.Close() })
		env.session, env.mode = c.String("session"), "unknown"
		return env, nil
	}
	svc, err := openServices(c)
	if err != nil {
		return nil, err
	}
	closers = append(closers, svc.close)
	env.svc, env.meter, env.dataDir = svc, svc.work.meter, svc.dataDir
	if env.cfg, err = loadConfig(c, svc.dataDir); err != nil {
		return fail(err)
	}
	if env.store, err = transcript.Open(c.Context, svc.db); err != nil {
		return fail(err)
	}
	s, err := svc.sessions.Get(c.Context, env.user, c.String("session"))
	if err != nil {
		return fail(fmt.Errorf("session: %w", err))
	}
	env.session, env.mode = s.ID, string(s.Mode)
	user := env.user
	if env.tools, err = agent.ConnectInProcess(c.Context, svc.server.MCPServer(),
		func(ctx context.Context) context.Context { return mcp.WithUser(ctx, user) }, metering.ClientCLI); err != nil {
		return fail(err)
	}
	closers = append(closers, func() { env.tools.Close() })
	return env, nil
}

// policyOf merges the config's policy with the flags.
func policyOf(c *cli.Context, cfg *config, mode string) (agent.Policy, error) {
	p := cfg.Agent.Policy
	if v := c.String("approval"); v != "" {
		p.Approval = v
	}
	if p.Approval == "" {
		p.Approval = agent.DefaultApproval(mode)
		if mode == "unknown" {
			p.Approval = agent.ApprovalAsk
		}
	}
	if v := c.Int("max-turns"); v > 0 {
		p.MaxTurns = v
	}
	if v := c.Int64("max-tokens"); v > 0 {
		p.MaxTokens = v
	}
	if v := c.Float64("max-cost"); v > 0 {
		p.MaxCostMicros = int64(v * 1e6)
	}
	if v := c.StringSlice("allow"); len(v) > 0 {
		p.Allow = v
	}
	if v := c.StringSlice("deny"); len(v) > 0 {
		p.Deny = append(p.Deny, v...)
	}
	if err := p.Validate(); err != nil {
		return p, cli.Exit(err.Error(), exitUsage)
	}
	return p, nil
}

func runChat(c *cli.Context) error {
	output := c.String("output")
	if output != "text" && output != "json" && output != "stream-json" {
		return cli.Exit(fmt.Sprintf("--output %q: want text, json or stream-json", output), exitUsage)
	}
	if n := btoi(c.Bool("continue")) + btoi(c.String("resume") != "") + btoi(c.String("fork") != ""); n > 1 {
		return cli.Exit("--continue, --resume and --fork exclude each other", exitUsage)
	}
	env, err := openChatEnv(c)
	if err != nil {
		return err
	}
	defer env.close()
	fork := c.String("fork")
	if fork != "" {
		if err := env.forkSession(c.Context, fork); err != nil {
			return err
		}
	}
	model, baseURL, key, err := modelOf(c, env.cfg)
	if err != nil {
		return err
	}
	policy, err := policyOf(c, env.cfg, env.mode)
	if err != nil {
		return err
	}
	profile, _, err := env.store.Profile(c.Context, baseURL, model)
	if err != nil {
		return err
	}
	resume := c.String("resume")
	if c.Bool("continue") {
		last, err := env.store.Get(c.Context, env.user, "")
		if err != nil {
			return cli.Exit("no chat to continue: start one first", exitUsage)
		}
		resume = last.ID
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	interactive := c.String("prompt") == ""
	term := isTerminal(os.Stdin) && isTerminal(os.Stderr)
	cfg := agent.Config{Model: &provider.Client{BaseURL: baseURL, APIKey: key, Profile: profile, OnProfile: rememberProfile(ctx, env.store)}, ModelName: model,
		Tools: env.tools, Policy: policy, User: env.user, Session: env.session, Client: metering.ClientCLI, Meter: env.meter,
		Images: env.cfg.Agent.imagesFor(profile)}
	if term {
		cfg.Approve = terminalApprover(os.Stdin, os.Stderr)
	}
	task := c.String("task")
	if task != "" {
		id, note, err := claimTask(ctx, env.tools, task, env.session)
		if err != nil {
			return cli.Exit(err.Error(), exitError)
		}
		cfg.Task, task = id, id
		renew := time.NewTicker(renewEvery)
		defer renew.Stop()
		// c.Context, not ctx: the REPL stops ctx's signal handling, which cancels it.
		defer keepClaim(c.Context, env.tools, id, env.session, renew.C, func(msg string) { fmt.Fprintln(os.Stderr, "warren: warning:", msg) })()
		cfg.System = agent.DefaultSystem + "\n\nYou are working on task " + id + " of the task board:\n" + note +
			"\nWhen it is finished, mark it done with task_update (status done); not before."
	}
	sess, err := chat.Open(ctx, chat.Options{Store: env.store, Agent: cfg, BaseURL: baseURL, Resume: resume, Fork: fork,
		LogTranscripts: env.cfg.Metering.LogTranscripts})
	if err != nil {
		if errors.Is(err, transcript.ErrNotFound) {
			return cli.Exit(err.Error()+": see 'warren chat ls'", exitUsage)
		}
		return err
	}
	if interactive {
		// Not ctx: stopping its signal handling (Ctrl-C becomes the REPL's)
		// also cancels it.
		return runREPL(c.Context, stop, sess, env, os.Stdin, os.Stdout, os.Stderr)
	}
	d, err := runOnce(ctx, sess, c.String("prompt"), output, os.Stdout, os.Stderr)
	if task != "" {
		noteTask(context.WithoutCancel(ctx), env.tools, task, env.session, d)
	}
	if err != nil {
		return err
	}
	if code := exitFor(d.Reason); code != 0 {
		// Said once, by main, whatever the output format: the JSON
		// formats carry it on stdout too.
		msg := d.Error
		if msg == "" {
			msg = "the run ended (" + d.Reason + ") without saying why"
		}
		return cli.Exit(msg, code)
	}
	return nil
}

// rememberProfile stores what a run learned of the endpoint (as 'chat
// doctor' does); failing to store it costs only the detection again.
func rememberProfile(ctx context.Context, st *transcript.Store) func(provider.Profile) {
	return func(p provider.Profile) {
		_ = st.SaveProfile(context.WithoutCancel(ctx), p)
	}
}

// runOnce runs one prompt and prints it in the chosen output format.
func runOnce(ctx context.Context, sess *chat.Session, prompt, output string, stdout, stderr io.Writer) (agent.DoneInfo, error) {
	enc := json.NewEncoder(stdout)
	var emit func(agent.Event)
	switch output {
	case "stream-json":
		emit = func(e agent.Event) { enc.Encode(e) }
	case "text":
		r := newRenderer(stderr, false)
		emit = func(e agent.Event) {
			if e.Type != agent.EventText { // the answer goes to stdout at the end
				r.event(e)
			}
		}
	}
	d, err := sess.Run(ctx, prompt, emit)
	if err != nil {
		return d, err
	}
	t := sess.Chat.Totals
	switch output {
	case "text":
		if d.Answer != "" {
			fmt.Fprintln(stdout, d.Answer)
		}
	case "json":
		enc.Encode(map[string]any{"chat_id": sess.Chat.ID, "session_id": sess.Chat.Session, "answer": d.Answer,
			"usage":    map[string]any{"input_tokens": t.InputTokens, "output_tokens": t.OutputTokens, "cached_tokens": t.CachedTokens, "estimated": t.Estimated},
			"cost_usd": float64(t.CostMicros) / 1e6, "turns": d.Turns, "ended": d.Reason, "error": d.Error})
	}
	return d, nil
}

// terminalApprover asks on the terminal: y, n or a (always).
func terminalApprover(in io.Reader, out io.Writer) agent.Approver {
	return func(ctx context.Context, call agent.CallInfo, tool agent.ToolInfo) (agent.Decision, error) {
		fmt.Fprintf(out, "  allow %s %s? [y/n/a(lways)] ", call.Name, shorten(call.Arguments, 200))
		line, err := readLine(in)
		if err != nil {
			return agent.Deny, agent.ErrNoApprover
		}
		return approvalAnswer(line), nil
	}
}

// approvalAnswer reads an answer to "allow …? [y/n/a(lways)]": anything
// but yes or always denies.
func approvalAnswer(line string) agent.Decision {
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return agent.Approve
	case "a", "always":
		return agent.Always
	}
	return agent.Deny
}

// readLine reads one line byte by byte, so that nothing after it is
// consumed from a shared reader.
func readLine(in io.Reader) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for {
		n, err := in.Read(one)
		if n == 1 {
			if one[0] == '\n' {
				return string(b), nil
			}
			b = append(b, one[0])
		}
		if err != nil {
			if len(b) > 0 && errors.Is(err, io.EOF) {
				return string(b), nil
			}
			return string(b), err
		}
	}
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
