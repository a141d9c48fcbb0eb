package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/warrenhq/warren/sessions"
)

// ShellExecInput is the input of shell_exec.
type ShellExecInput struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session to run in; omitted: your default session"`
	Command   string `json:"command" jsonschema:"a /bin/sh command line; cd and export persist between calls"`
	TimeoutMS int    `json:"timeout_ms,omitempty" jsonschema:"kill the command after this many milliseconds (default 600000, ten minutes; max 3600000)"`
	YieldMS   int    `json:"yield_ms,omitempty" jsonschema:"return after this many milliseconds if the command still runs, with running true and a job_id for shell_wait; the command goes on in the background (default 30000, or the server's --shell-yield)"`
}

// ShellResult is the output of shell_exec, shell_wait and shell_kill.
type ShellResult struct {
	SessionID      string `json:"session_id" jsonschema:"the session the command runs in"`
	ExitCode       int    `json:"exit_code" jsonschema:"the command's exit status (128+signal when killed); meaningful when running is false"`
	Stdout         string `json:"stdout" jsonschema:"standard output (new output only after a yield); invalid UTF-8 replaced"`
	Stderr         string `json:"stderr" jsonschema:"standard error (new output only after a yield)"`
	Cwd            string `json:"cwd" jsonschema:"the shell's working directory after the command"`
	DurationMS     int64  `json:"duration_ms" jsonschema:"wall-clock time of the command so far"`
	Truncated      bool   `json:"truncated" jsonschema:"output exceeded the cap: head and tail kept"`
	TimedOut       bool   `json:"timed_out" jsonschema:"the command was killed at its timeout"`
	Interrupted    bool   `json:"interrupted" jsonschema:"the command was interrupted by shell_kill or cancellation"`
	ShellRestarted bool   `json:"shell_restarted" jsonschema:"the shell died and a fresh one started with the same cwd and exports"`
	Running        bool   `json:"running" jsonschema:"the command still runs: call shell_wait with job_id"`
	JobID          string `json:"job_id,omitempty" jsonschema:"the running command, for shell_wait and shell_kill"`
	StateSaved     bool   `json:"state_saved" jsonschema:"the cwd and exports after the command are in the database and survive a crash of the server; false: they are kept and retried (see warning); meaningful when running is false"`
	Warning        string `json:"warning,omitempty" jsonschema:"something you should know about this result, e.g. why the cwd and exports are not saved yet"`
}

// ShellWaitInput is the input of shell_wait.
type ShellWaitInput struct {
	JobID   string `json:"job_id" jsonschema:"the job_id a running shell_exec returned"`
	YieldMS int    `json:"yield_ms,omitempty" jsonschema:"return after this many milliseconds if it still runs (default 30000, or the server's --shell-yield)"`
}

// ShellKillInput is the input of shell_kill.
type ShellKillInput struct {
	SessionID string `json:"session_id,omitempty" jsonschema:"the session whose running command to stop; omitted: your default session"`
	JobID     string `json:"job_id,omitempty" jsonschema:"the command to stop; omitted: whatever runs in the session"`
}

const maxTimeout = time.Hour

// defaultTimeout is the kill bound of a command that names none. It is not
// tied to how long a client waits (the call returns after the yield and the
// command goes on as a job), so it can be long enough for a build or a test
// suite, and still ends a command that hangs.
const defaultTimeout = 10 * time.Minute

// DefaultYield is how long shell_exec and shell_wait wait for a command
// before they return it as a running job. Clients give up on a request
// after a while (the TypeScript SDK after 60 s, others sooner) and a
// command whose call times out is lost to the agent: 30 s leaves a margin
// under the common limits and still lets most commands end in one call.
const DefaultYield = 30 * time.Second

// yield returns the yield of a call: its own, or the server's default.
func (d *deps) yield(ms int) time.Duration {
	if ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	if d.shellYield > 0 {
		return d.shellYield
	}
	return DefaultYield
}

func shellExec(d *deps) Tool {
	t := mcp.NewTool("shell_exec",
		mcp.WithDescription("Run a command in the session's persistent, jailed /bin/sh (the workspace is /workspace; "+
			"no network). cd and export persist between calls and across server restarts. A failing or timed-out "+
			"command is a normal result with its exit code. A command still running after yield_ms (default 30 s) "+
			"goes on in the background: the result has running true and a job_id for shell_wait. Calls on one "+
			"session run one at a time, in the order they arrive. Output streams as progress notifications when "+
			"the request carries a progressToken."),
		mcp.WithInputSchema[ShellExecInput](),
		mcp.WithOutputSchema[ShellResult](),
		annotations("Run a shell command", false, true, false, false),
	)
	h := typedHandler(func(ctx context.Context, req mcp.CallToolRequest, in ShellExecInput) (result[ShellResult], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[ShellResult]{}, err
		}
		if strings.TrimSpace(in.Command) == "" {
			return result[ShellResult]{}, sessions.ErrEmptyCommand
		}
		if in.TimeoutMS < 0 || in.YieldMS < 0 {
			return result[ShellResult]{}, errorf("timeout_ms and yield_ms must be positive numbers of milliseconds")
		}
		timeout := time.Duration(in.TimeoutMS) * time.Millisecond
		if timeout > maxTimeout {
			return result[ShellResult]{}, errorf("timeout_ms %d is over the maximum of %d (one hour): use a smaller value", in.TimeoutMS, maxTimeout.Milliseconds())
		}
		if timeout == 0 {
			timeout = defaultTimeout
		}
		p := newProgress(ctx, d.notes, req)
		defer p.finish()
		o, err := d.sessions.Exec(ctx, user, in.SessionID, in.Command, sessions.ExecOptions{
			Timeout: timeout, Yield: d.yield(in.YieldMS), Progress: p.output,
			Log: func(s *sessions.Session) sessions.OutputLog { return d.commandLog(ctx, s.ID) },
		})
		if err != nil {
			return result[ShellResult]{}, d.execError(ctx, err)
		}
		return d.shellResult(o), nil
	})
	return Tool{Toolset: "shell", Tool: t, Handler: h}
}

func shellWait(d *deps) Tool {
	t := mcp.NewTool("shell_wait",
		mcp.WithDescription("Wait for a command that shell_exec left running (running: true) and get its new output "+
			"and, once it ends, its exit code."),
		mcp.WithInputSchema[ShellWaitInput](),
		mcp.WithOutputSchema[ShellResult](),
		// Not read-only: a job that ends saves the session's cwd and exports.
		annotations("Wait for a running command", false, false, false, false),
	)
	h := typedHandler(func(ctx context.Context, req mcp.CallToolRequest, in ShellWaitInput) (result[ShellResult], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[ShellResult]{}, err
		}
		if in.YieldMS < 0 {
			return result[ShellResult]{}, errorf("yield_ms must be a positive number of milliseconds")
		}
		p := newProgress(ctx, d.notes, req)
		defer p.finish()
		// Cancelling a wait stops waiting, not the command: shell_kill does that.
		o, err := d.sessions.Wait(ctx, user, in.JobID, sessions.WaitOptions{Yield: d.yield(in.YieldMS), Progress: p.output})
		if errors.Is(err, sessions.ErrJobNotFound) {
			return result[ShellResult]{}, errorf("job %q not found: it finished and its result was already returned, or the server restarted; "+
				"run the command again with shell_exec", in.JobID)
		}
		if err != nil {
			return result[ShellResult]{}, err
		}
		return d.shellResult(o), nil
	})
	return Tool{Toolset: "shell", Tool: t, Handler: h}
}

func shellKill(d *deps) Tool {
	t := mcp.NewTool("shell_kill",
		mcp.WithDescription("Interrupt the command running in a session (SIGINT, then SIGKILL). The shell, its cwd and "+
			"exports survive. Returns the command's last output and exit code."),
		mcp.WithInputSchema[ShellKillInput](),
		mcp.WithOutputSchema[ShellResult](),
		annotations("Interrupt a running command", false, true, true, false),
	)
	h := typedHandler(func(ctx context.Context, req mcp.CallToolRequest, in ShellKillInput) (result[ShellResult], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[ShellResult]{}, err
		}
		p := newProgress(ctx, d.notes, req)
		defer p.finish()
		o, err := d.sessions.Kill(ctx, user, in.SessionID, in.JobID, sessions.WaitOptions{Progress: p.output})
		switch {
		case errors.Is(err, sessions.ErrJobNotFound):
			return result[ShellResult]{}, errorf("job %q not found: it finished and its result was already returned; nothing to kill", in.JobID)
		case errors.Is(err, sessions.ErrNothingRunning):
			return result[ShellResult]{}, errorf("%s: there is nothing to kill", err.Error())
		case err != nil:
			return result[ShellResult]{}, err
		}
		return d.shellResult(o), nil
	})
	return Tool{Toolset: "shell", Tool: t, Handler: h}
}

// shellResult renders the outcome of a command: running (a job left in
// the background) or ended, with whether its cwd and exports are saved.
func (d *deps) shellResult(o sessions.Outcome) result[ShellResult] {
	res := o.Result
	r := ShellResult{
		SessionID: o.Session.ID, Running: o.Running, Cwd: res.Cwd,
		Stdout: text(res.Stdout), Stderr: text(res.Stderr), Truncated: res.Truncated,
	}
	if o.Running {
		r.JobID = o.JobID
		return result[ShellResult]{Out: r, Text: render(r)}
	}
	r.ExitCode, r.DurationMS, r.TimedOut = res.ExitCode, res.Duration.Milliseconds(), res.TimedOut
	r.Interrupted, r.ShellRestarted, r.StateSaved = res.Interrupted, res.ShellRestarted, true
	if o.StateErr != nil {
		d.log.Warn().Err(o.StateErr).Str("session", o.Session.ID).Msg("save shell state")
		r.StateSaved, r.Warning = false, o.StateErr.Error()
	}
	return result[ShellResult]{Out: r, Text: render(r)}
}

// render is the text a model reads when it ignores structuredContent.
func render(r ShellResult) string {
	var b strings.Builder
	b.WriteString(r.Stdout)
	if r.Stdout != "" && !strings.HasSuffix(r.Stdout, "\n") {
		b.WriteString("\n")
	}
	if r.Stderr != "" {
		b.WriteString("[stderr]\n")
		b.WriteString(r.Stderr)
		if !strings.HasSuffix(r.Stderr, "\n") {
			b.WriteString("\n")
		}
	}
	switch {
	case r.Running:
		fmt.Fprintf(&b, "[still running in the background as job %s in session %s: call shell_wait {\"job_id\":%q} "+
			"for more output and the exit code, or shell_kill to stop it]", r.JobID, r.SessionID, r.JobID)
		return b.String()
	case r.TimedOut:
		fmt.Fprintf(&b, "[timed out after %d ms and killed; exit %d]", r.DurationMS, r.ExitCode)
	case r.Interrupted:
		fmt.Fprintf(&b, "[interrupted; exit %d]", r.ExitCode)
	default:
		fmt.Fprintf(&b, "[exit %d in %d ms]", r.ExitCode, r.DurationMS)
	}
	fmt.Fprintf(&b, " cwd %s, session %s", r.Cwd, r.SessionID)
	if r.Truncated {
		b.WriteString("; output truncated (head and tail kept)")
	}
	if r.ShellRestarted {
		b.WriteString("; the shell exited and was restarted with the same cwd and exports")
	}
	if r.Warning != "" {
		b.WriteString("\n[warning: " + r.Warning + "]")
	}
	return b.String()
}
