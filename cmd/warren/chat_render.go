package main

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/agent"
)

func zerologNop() zerolog.Logger { return zerolog.Nop() }

// renderer prints events for a person: streamed text, one line per tool
// call with a short result, live command output under it, usage after
// each model call. On a terminal, markdown emphasis and headings are
// styled; piped, the text is left as it is.
type renderer struct {
	w        io.Writer
	term     bool
	midLine  bool
	lastTurn int
}

func newRenderer(w io.Writer, term bool) *renderer { return &renderer{w: w, term: term} }

var (
	mdBold    = regexp.MustCompile(`\*\*([^*\n]+)\*\*`)
	mdCode    = regexp.MustCompile("`([^`\n]+)`")
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.*)$`)
)

// markdown styles a piece of text for a terminal.
func (r *renderer) markdown(s string) string {
	if !r.term {
		return s
	}
	s = mdHeading.ReplaceAllString(s, "\x1b[1;4m$1\x1b[0m")
	s = mdBold.ReplaceAllString(s, "\x1b[1m$1\x1b[0m")
	return mdCode.ReplaceAllString(s, "\x1b[36m$1\x1b[0m")
}

func (r *renderer) dim(s string) string {
	if !r.term {
		return s
	}
	return "\x1b[2m" + s + "\x1b[0m"
}

func (r *renderer) newline() {
	if r.midLine {
		fmt.Fprintln(r.w)
		r.midLine = false
	}
}

func (r *renderer) event(e agent.Event) {
	switch e.Type {
	case agent.EventText:
		fmt.Fprint(r.w, r.markdown(e.Text))
		r.midLine = !strings.HasSuffix(e.Text, "\n")
	case agent.EventToolCall:
		r.newline()
		fmt.Fprintf(r.w, "→ %s %s\n", e.Call.Name, shorten(e.Call.Arguments, 120))
	case agent.EventProgress:
		for _, l := range strings.Split(strings.TrimRight(e.Text, "\n"), "\n") {
			fmt.Fprintln(r.w, r.dim("  │ "+l))
		}
	case agent.EventToolResult:
		mark := "✓"
		if e.Result.IsError {
			mark = "✗"
		}
		first := strings.SplitN(strings.TrimSpace(e.Result.Text), "\n", 2)[0]
		fmt.Fprintf(r.w, "  %s %s\n", mark, r.dim(shorten(first, 120)))
	case agent.EventApproval:
		r.newline()
	case agent.EventUsage:
		u := e.Usage
		est := ""
		if u.Estimated {
			est = " (estimated)"
		}
		r.newline()
		fmt.Fprintln(r.w, r.dim(fmt.Sprintf("  [%d in / %d out tokens%s, $%.4f · chat %d tokens, $%.4f]",
			u.InputTokens, u.OutputTokens, est, float64(u.CostMicros)/1e6, u.TotalTokens, float64(u.TotalCostMicros)/1e6)))
	case agent.EventWarning:
		r.newline()
		fmt.Fprintln(r.w, "warning: "+e.Text)
	case agent.EventError:
		r.newline()
		fmt.Fprintln(r.w, "error: "+e.Text)
	case agent.EventDone:
		r.newline()
	}
}
