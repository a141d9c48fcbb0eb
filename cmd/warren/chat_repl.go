package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

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

// runREPL is the interactive chat. Lines are read by the terminal's own
// line discipline (erase, kill-line, Ctrl-D); Ctrl-C interrupts the
// running turn only.
func runREPL(ctx context.Context, stopSignals func(), sess *chat.Session, env *chatEnv, in io.Reader, out, errw io.Writer) error {
	stopSignals() // Ctrl-C is ours now: it stops a turn, not the process
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	term := isTerminal(os.Stdout)
	r := newRenderer(out, term)
	approve := func(ctx context.Context, call agent.CallInfo, _ agent.ToolInfo) (agent.Decision, error) {
		fmt.Fprintf(out, "  allow %s %s? [y/n/a(lways)] ", call.Name, shorten(call.Arguments, 200))
		select {
		case <-ctx.Done():
			return agent.Deny, ctx.Err()
		case line, ok := <-lines:
			if !ok {
				return agent.Deny, agent.ErrNoApprover
			}
			switch strings.ToLower(strings.TrimSpace(line)) {
			case "y", "yes":
				return agent.Approve, nil
			case "a", "always":
				return agent.Always, nil
			}
			return agent.Deny, nil
		}
	}
	sess.Agent.SetApprover(approve)
	fmt.Fprintf(out, "warren chat %s in session %s (%s). /help for commands.\n", sess.Chat.ID, sess.Chat.Session, sess.Agent.Policy())
	for {
		fmt.Fprint(out, "› ")
		var line string
		select {
		case <-sigs:
			fmt.Fprintln(out, "\n(Ctrl-D or /exit leaves)")
			continue
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(out)
				return nil
			}
			line = strings.TrimSpace(l)
		}
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "/") {
			if leave := slash(ctx, line, sess, env, out); leave {
				return nil
			}
			continue
		}
		turn, cancel := context.WithCancel(ctx)
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
