// Package tasks is the task board: it reads and rewrites TASKS.md without
// losing a byte of what is not a task, keeps the tasks in SQLite, and hands
// out leased claims so that many agents can share one board safely.
//
// The file is for people and the database is for concurrency: every change
// goes to the database and is written back to the file, and hand edits to
// the file are merged on the next read (see Board.Sync).
package tasks

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Status is where a task stands.
type Status string

// The statuses a task can have; the file shows them as [ ], [~], [!], [x].
const (
	StatusOpen       Status = "open"
	StatusInProgress Status = "in_progress"
	StatusBlocked    Status = "blocked"
	StatusDone       Status = "done"
)

// Statuses lists the valid statuses in the order people read them.
var Statuses = []Status{StatusOpen, StatusInProgress, StatusBlocked, StatusDone}

// ParseStatus validates a status name; the error lists the valid ones.
func ParseStatus(s string) (Status, error) {
	st := Status(strings.ToLower(strings.TrimSpace(s)))
	if _, ok := statusBox[st]; ok {
		return st, nil
	}
	names := make([]string, len(Statuses))
	for i, v := range Statuses {
		names[i] = string(v)
	}
	return "", invalidf("invalid status %q: use one of %s", s, strings.Join(names, ", "))
}

// Note is one timestamped line of a task's history.
type Note struct {
	At   time.Time // UTC, to the minute for notes added through the board
	By   string    // user who wrote it; empty when unknown
	Text string
}

func (n Note) equal(o Note) bool { return n.At.Equal(o.At) && n.By == o.By && n.Text == o.Text }

// Holder identifies who holds a claim: a user working in a session.
type Holder struct {
	User    string
	Session string
}

// String renders a holder for messages.
func (h Holder) String() string { return fmt.Sprintf("%s (session %s)", h.User, h.Session) }

// Claim is a live lease on a task.
type Claim struct {
	Holder    Holder
	ClaimedAt time.Time
	ExpiresAt time.Time
}

// Task is a task as the board knows it.
type Task struct {
	ID     string // "T-12"; stable, never reused
	Title  string
	Status Status
	Owner  string // user name without the "@"; empty when nobody owns it
	Link   string // commit or pull request, recorded on completion
	Notes  []Note
	Claim  *Claim // nil when nobody holds a live claim
	// Conflict is true when the task was changed both in the file and on
	// the board since the last sync; see Board.Resolve.
	Conflict bool
}

// Change is what Board.Update changes; zero fields are left alone.
type Change struct {
	Status Status
	Note   string // appended with a timestamp and the author
	Link   string
}

// Filter selects tasks in Board.List; zero fields match every task.
type Filter struct {
	Status Status
	Owner  string // with or without the leading "@"
}

// parseID accepts "T-12", "t-12" and "12".
func parseID(id string) (int, error) {
	s := strings.TrimSpace(id)
	if len(s) > 2 && (s[:2] == "T-" || s[:2] == "t-") {
		s = s[2:]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 999999999 || s[0] == '0' || s[0] == '+' {
		return 0, invalidf("invalid task id %q: want T-<number>, e.g. T-12", id)
	}
	return n, nil
}

// Limits on what one task keeps, in bytes: a client writes them, the
// file and the database keep them, and every agent that reads the board
// reads them. A board is at most MaxFileSize.
const (
	MaxTitle = 512
	MaxNote  = 4 << 10
	MaxLink  = 2 << 10
)

// maxText is the limit of each kind of text; others get MaxTitle.
var maxText = map[string]int{"title": MaxTitle, "note": MaxNote, "link": MaxLink}

// checkText refuses text that could not survive a trip through the file
// (line breaks and other control characters) and text over its limit.
func checkText(what, s string) error {
	limit, ok := maxText[what]
	if !ok {
		limit = MaxTitle
	}
	if len(s) > limit {
		return invalidf("%s is %d bytes, over the limit of %d: say it shorter (put long text in a file and link it)", what, len(s), limit)
	}
	for _, r := range s {
		if r != '\t' && unicode.IsControl(r) {
			return invalidf("%s must be a single line without control characters", what)
		}
	}
	return nil
}

// checkUser refuses user names that would not read back from the file as
// the same "@name".
func checkUser(u string) error {
	if u == "" {
		return invalidf("user is required")
	}
	if strings.ContainsAny(u, ":") || u[0] == '@' || strings.IndexFunc(u, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}) >= 0 {
		return invalidf("invalid user name %q: no spaces, no ':' and no leading '@'", u)
	}
	return nil
}
