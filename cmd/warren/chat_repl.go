package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/chzyer/readline"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/agent/chat"
)

const replHelp = `Type a request and press Enter. While the agent works, Ctrl-C stops the turn; Ctrl-D (or /exit) leaves.
  /help            this help
  /session         the session the agent works in
  /diff            what changed in the workspace (session_diff)
  /tasks           the task board (task_list)
  /usage           tokens and cost of this chat
  /model [NAME]    show or switch the model
  /policy [auto|ask|read-only]   show the policy, or change the approval mode
  /compact         drop old tool outputs from the conversation to save tokens
  /exit            leave (the chat is saved: 'warren chat --continue' picks it up)`

// runREPL is the interactive chat. Lines are edited with
// github.com/chzyer/readline (arrows, history search, Ctrl-A/E/W/U, tab
// completion of slash commands): the line-editing library the Go module
// proxy serves that is widely used and keeps to the terminal it is given.
// History is kept by warren (see historyFile). Ctrl-C at the prompt clears
// the line; while a turn runs the terminal is back in cooked mode, so
// Ctrl-C is a SIGINT that stops the turn only. Ctrl-D on an empty line
// leaves.
func runREPL(ctx context.Context, stopSignals func(), sess *chat.Session, env *chatEnv, in *os.File, out, errw io.Writer) error {
	stopSignals() // Ctrl-C is ours now: it stops a turn, not the process
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)

	hist, past, err := openHistory(env.dataDir)
	if err != nil {
		fmt.Fprintln(errw, "warren: no history:", err)
	}
	defer hist.close()
	var items []readline.PrefixCompleterInterface
	for _, c := range slashCommands {
		items = append(items, readline.PcItem(c))
	}
	rl, err := readline.NewEx(&readline.Config{Prompt: "› ", Stdin: in, Stdout: out, Stderr: errw,
		HistoryLimit: historyLimit, DisableAutoSaveHistory: true, AutoComplete: readline.NewPrefixCompleter(items...),
		InterruptPrompt: "^C", EOFPrompt: "\n"})
	if err != nil {
		return fmt.Errorf("start line editor: %w", err)
	}
	defer rl.Close()
	for _, l := range past {
		rl.SaveHistory(l) //nolint:errcheck // in memory only: no HistoryFile
	}

	term := isTerminal(os.Stdout)
	r := newRenderer(out, term)
	var cancelTurn context.CancelFunc
	approve := func(ctx context.Context, call agent.CallInfo, _ agent.ToolInfo) (agent.Decision, error) {
		rl.SetPrompt(fmt.Sprintf("  allow %s %s? [y/n/a(lways)] ", call.Name, shorten(call.Arguments, 200)))
		defer rl.SetPrompt("› ")
		line, err := rl.Readline()
		switch {
		case errors.Is(err, readline.ErrInterrupt):
			cancelTurn() // Ctrl-C at an approval stops the turn
			return agent.Deny, context.Canceled
		case err != nil:
			return agent.Deny, agent.ErrNoApprover
		}
		return approvalAnswer(line), nil
	}
	sess.Agent.SetApprover(approve)
	fmt.Fprintf(out, "warren chat %s in session %s (%s). /help for commands.\n", sess.Chat.ID, sess.Chat.Session, sess.Agent.Policy())
	for {
		l, err := rl.Readline()
		switch {
		case errors.Is(err, readline.ErrInterrupt):
			fmt.Fprintln(out, "(Ctrl-D or /exit leaves)")
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("read prompt: %w", err)
		}
		line := strings.TrimSpace(l)
		if line == "" {
			continue
		}
		rl.SaveHistory(line) //nolint:errcheck // in memory only
		hist.add(line)
		if strings.HasPrefix(line, "/") {
			if leave := slash(ctx, line, sess, env, out); leave {
				return nil
			}
			continue
		}
		for len(sigs) > 0 { // a Ctrl-C from before this turn does not stop it
			<-sigs
		}
		turn, cancel := context.WithCancel(ctx)
		cancelTurn = cancel
		done := make(chan struct{})
		go func() {
			select {
			case <-sigs:
				fmt.Fprintln(out, "\n^C stopping the turn…")
				cancel()
			case <-done:
			}
		}()
		d, err := sess.Run(turn, line, r.event)
		close(done)
		cancel()
		if err != nil {
			fmt.Fprintln(errw, "warren: save chat:", err)
		}
		if d.Reason == agent.EndCancelled {
			fmt.Fprintln(out, "(turn stopped)")
		}
	}
}

// slashCommands are completed with Tab.
var slashCommands = []string{"/help", "/session", "/diff", "/tasks", "/usage", "/model", "/policy", "/compact", "/exit"}

// slash runs a slash command; it reports whether to leave.
func slash(ctx context.Context, line string, sess *chat.Session, env *chatEnv, out io.Writer) bool {
	cmd, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	tool := func(name string, args map[string]any) {
		if sess.Chat.Session != "" {
			args["session_id"] = sess.Chat.Session
		}
		text, _, err := env.tools.Call(ctx, name, args, nil)
		if err != nil {
			fmt.Fprintln(out, "error:", err)
			return
		}
		fmt.Fprintln(out, strings.TrimRight(text, "\n"))
	}
	switch cmd {
	case "/exit", "/quit":
		return true
	case "/help":
		fmt.Fprintln(out, replHelp)
	case "/session":
		fmt.Fprintf(out, "chat %s, session %s (%s)\n", sess.Chat.ID, sess.Chat.Session, env.mode)
	case "/diff":
		tool("session_diff", map[string]any{})
	case "/tasks":
		text, _, err := env.tools.Call(ctx, "task_list", map[string]any{}, nil)
		if err != nil {
			fmt.Fprintln(out, "error:", err)
		} else {
			fmt.Fprintln(out, strings.TrimRight(text, "\n"))
		}
	case "/usage":
		t := sess.Agent.Totals
		est := ""
		if t.Estimated {
			est = " (partly estimated)"
		}
		fmt.Fprintf(out, "%d turns, %d input + %d output tokens (%d cached)%s, $%.4f\n", t.Turns, t.InputTokens, t.OutputTokens, t.CachedTokens, est, float64(t.CostMicros)/1e6)
	case "/model":
		if arg != "" {
			sess.Agent.SetModel(arg)
			sess.Chat.Model = arg
		}
		fmt.Fprintln(out, "model:", sess.Agent.ModelName())
	case "/policy":
		if arg != "" {
			p := sess.Agent.Policy()
			p.Approval = arg
			if err := sess.Agent.SetPolicy(p); err != nil {
				fmt.Fprintln(out, "error:", err)
			}
		}
		fmt.Fprintln(out, "policy:", sess.Agent.Policy())
	case "/compact":
		fmt.Fprintf(out, "dropped %d old tool outputs\n", sess.Agent.Compact(2))
	default:
		fmt.Fprintf(out, "unknown command %s: /help lists them\n", cmd)
	}
	return false
}
