package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/agent"
	"github.com/warrenhq/warren/agent/provider"
	"github.com/warrenhq/warren/agent/transcript"
	"github.com/warrenhq/warren/sessions"
)

func openTranscripts(c *cli.Context) (*transcript.Store, *config, func(), error) {
	_, cfg, db, err := openData(c)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := transcript.Open(c.Context, db)
	if err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return st, cfg, func() { db.Close() }, nil
}

func runChatList(c *cli.Context) error {
	st, _, done, err := openTranscripts(c)
	if err != nil {
		return err
	}
	defer done()
	chats, err := st.List(c.Context, sessions.LocalUser())
	if err != nil {
		return err
	}
	if len(chats) == 0 {
		fmt.Fprintln(c.App.Writer, "no chats yet: start one with 'warren chat'")
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "CHAT\tSESSION\tMODEL\tUPDATED\tTURNS\tTOKENS\tCOST\tENDED\tTITLE")
	for _, ch := range chats {
		est := ""
		if ch.Totals.Estimated {
			est = "~"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s%d\t$%.4f\t%s\t%s\n", ch.ID, ch.Session, ch.Model, ch.Updated.Format(time.DateTime),
			ch.Totals.Turns, est, ch.Totals.Tokens(), float64(ch.Totals.CostMicros)/1e6, ch.Ended, ch.Title)
	}
	return tw.Flush()
}

func runChatExport(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit("usage: warren chat export ID --format md|json", exitUsage)
	}
	format := c.String("format")
	if format != "md" && format != "json" {
		return cli.Exit(fmt.Sprintf("--format %q: want md or json", format), exitUsage)
	}
	st, _, done, err := openTranscripts(c)
	if err != nil {
		return err
	}
	defer done()
	ch, err := st.Get(c.Context, sessions.LocalUser(), c.Args().First())
	if err != nil {
		return cli.Exit(err.Error()+": see 'warren chat ls'", exitUsage)
	}
	events, err := st.Events(c.Context, ch.ID)
	if err != nil {
		return err
	}
	msgs, err := st.Messages(c.Context, ch.ID)
	if err != nil {
		return err
	}
	if format == "json" {
		return writeJSON(c.App.Writer, map[string]any{"chat": ch, "messages": msgs, "events": events})
	}
	w := c.App.Writer
	fmt.Fprintf(w, "# %s\n\nchat %s · session %s · model %s · %d turns · %d tokens · $%.4f\n\n", ch.Title, ch.ID, ch.Session, ch.Model,
		ch.Totals.Turns, ch.Totals.Tokens(), float64(ch.Totals.CostMicros)/1e6)
	for _, m := range msgs {
		switch m.Role {
		case "system":
			continue
		case "user":
			fmt.Fprintf(w, "## You\n\n%s\n\n", m.Content)
		case "assistant":
			if m.Content != "" {
				fmt.Fprintf(w, "## Agent\n\n%s\n\n", m.Content)
			}
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(w, "**%s** `%s`\n\n", tc.Name, tc.Arguments)
			}
		case "tool":
			fmt.Fprintf(w, "```\n%s\n```\n\n", strings.TrimRight(m.Content, "\n"))
		}
	}
	return nil
}

func runChatDoctor(c *cli.Context) error {
	st, cfg, done, err := openTranscripts(c)
	if err != nil {
		return err
	}
	defer done()
	model, baseURL, key, err := modelOf(c, cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, 2*time.Minute)
	defer cancel()
	p, err := provider.Probe(ctx, provider.Client{BaseURL: baseURL, APIKey: key}, model)
	if err != nil {
		var st *provider.StatusError
		if errors.As(err, &st) && (st.Status == 401 || st.Status == 403) {
			// The provider's advice names "the config file": say which.
			return cli.Exit(err.Error()+"; the config file is "+cfg.path, exitError)
		}
		return cli.Exit(err.Error(), exitError)
	}
	if err := st.SaveProfile(c.Context, p); err != nil {
		return err
	}
	w := c.App.Writer
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	fmt.Fprintf(w, "%s at %s (looks like %s)\n", model, baseURL, p.Server)
	fmt.Fprintf(w, "  tools accepted:         %s\n", yes(p.Tools))
	if p.Tools {
		fmt.Fprintf(w, "  streamed tool calls:    %s\n", map[bool]string{true: "ok", false: "dropped (tool requests are sent without streaming)"}[p.StreamToolCalls])
		fmt.Fprintf(w, "  tool-call ids:          %s\n", map[bool]string{true: "present", false: "missing (made up by warren)"}[p.ToolCallIDs])
		fmt.Fprintf(w, "  arguments sent as:      %s\n", p.ArgumentsType)
		fmt.Fprintf(w, "  parallel_tool_calls:    %s\n", yes(p.ParallelToolCalls))
	}
	fmt.Fprintf(w, "  images:                 %s\n", map[bool]string{true: "yes (pictures from read_file are shown to the model)",
		false: "no (pictures are not sent; set agent.images in the config to override)"}[p.Images])
	fmt.Fprintf(w, "  usage in streams:       %s\n", map[bool]string{true: "yes", false: "no (estimated and marked so)"}[p.UsageInStream])
	if p.ContextWindow > 0 {
		fmt.Fprintf(w, "  context kept:           about %d tokens\n", p.ContextWindow)
	}
	fmt.Fprintln(w, "profile stored; 'warren chat' uses it for this endpoint and model.")
	if p.Fix != "" {
		fmt.Fprintln(w, "fix: "+p.Fix)
		if !p.Tools {
			return cli.Exit("the endpoint cannot call tools, which the agent needs: apply the fix above and run 'warren chat doctor' again", exitError)
		}
	}
	_ = agent.EventDone
	return nil
}
