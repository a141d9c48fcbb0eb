package tasks

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The TASKS.md format is described for people in docs/TASKS-FORMAT.md.
// The parser keeps every input line with its own terminator so that an
// unmodified document renders back byte for byte, and a change rewrites
// only the lines of the tasks it touches.

// line is one line of a document with its terminator kept apart.
type line struct {
	text string // without the terminator
	eol  string // "\n", "\r\n", or "" for a last line without one
}

// item is what a task says in the file: the fields that a person can edit
// and that the board stores. Claims are not part of it.
type item struct {
	Num    int
	Title  string
	Status Status
	Owner  string
	Link   string
	Notes  []Note // the notes the file shows: the last shownNotes
	// Older counts the notes before those, which the file does not show
	// (they stay on the board and in task_list).
	Older int `json:",omitempty"`
}

// shownNotes is how many notes of a task the file shows: the file stays
// a page people read, however long a task's history grows.
const shownNotes = 10

// bodyKind says what a line under a task head is.
type bodyKind int

const (
	bodyText  bodyKind = iota // anything else: kept as written, not tracked
	bodyNote                  // "- 2026-05-01 14:03 @alice: text"
	bodyLink                  // "- link: https://…" (the first one only)
	bodyOlder                 // "- 3 older notes on the board (task_list)"
)

type bodyLine struct {
	line
	kind bodyKind
	note Note // when kind == bodyNote
}

// docTask is a task block: its head line and the lines nested under it.
type docTask struct {
	item
	prefix string // head text before the status box: indent, marker, "["
	box    byte   // the status character as written
	suffix string // head text after the box, as written
	indent int    // columns before the marker; body lines are indented more
	head   line
	body   []bodyLine
	lineNo int // 1-based, for error messages
}

// segment is a run of lines that are not a task, or one task block.
type segment struct {
	lines []line   // text that is not a task (nil for a task)
	task  *docTask // nil for text
}

// document is a parsed TASKS.md.
type document struct {
	segs     []segment
	eol      string // terminator for new lines: the first one in the input
	finalEOL bool   // whether the input ended with a terminator (or was empty)
}

var (
	headRE = regexp.MustCompile(`^([ \t]*(?:[-*+]|[0-9]{1,9}[.)])[ \t]+\[)([ xX~!])\][ \t]+T-([1-9][0-9]{0,8})(?:[ \t]+(.*?))?[ \t]*$`)
	noteRE = regexp.MustCompile(`^[ \t]+[-*+][ \t]+([0-9]{4}-[0-9]{2}-[0-9]{2})[ T]([0-9]{2}:[0-9]{2}(?::[0-9]{2})?)(?:Z| ?UTC)?:?(?:[ \t]+(.*?))?[ \t]*$`)
	byRE   = regexp.MustCompile(`^@([^\s:@][^\s:]*):(?:[ \t]+(.*))?$`)
	linkRE = regexp.MustCompile(`^[ \t]+[-*+][ \t]+(?i:link):[ \t]*(.*?)[ \t]*$`)
	// olderRE is the line the board writes above the shown notes.
	olderRE = regexp.MustCompile(`^[ \t]+[-*+][ \t]+([0-9]{1,9}) older notes? on the board\b`)
)

// boxStatus maps the character between the brackets to a status.
var boxStatus = map[byte]Status{' ': StatusOpen, 'x': StatusDone, 'X': StatusDone, '~': StatusInProgress, '!': StatusBlocked}

// statusBox is the character written for each status.
var statusBox = map[Status]byte{StatusOpen: ' ', StatusDone: 'x', StatusInProgress: '~', StatusBlocked: '!'}

// splitLines cuts data after every "\n"; a "\r" before it belongs to the
// terminator so that CRLF files keep their endings.
func splitLines(data []byte) []line {
	var ls []line
	s := string(data)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			ls = append(ls, line{text: s})
			break
		}
		text, eol := s[:i], "\n"
		if strings.HasSuffix(text, "\r") {
			text, eol = text[:len(text)-1], "\r\n"
		}
		ls = append(ls, line{text: text, eol: eol})
		s = s[i+1:]
	}
	return ls
}

// parse reads a TASKS.md. It never fails: what it does not recognise as a
// task is kept as text.
func parse(data []byte) *document {
	ls := splitLines(data)
	d := &document{eol: "\n", finalEOL: len(ls) == 0 || ls[len(ls)-1].eol != ""}
	for _, l := range ls {
		if l.eol != "" {
			d.eol = l.eol
			break
		}
	}
	var sc scanner
	var text []line
	for i := 0; i < len(ls); {
		var t *docTask
		if !sc.isCode(ls[i].text) {
			t = parseHead(ls[i])
		}
		sc.advance(ls[i].text)
		if t == nil {
			text = append(text, ls[i])
			i++
			continue
		}
		if text != nil {
			d.segs = append(d.segs, segment{lines: text})
			text = nil
		}
		t.lineNo = i + 1
		i++
		for ; i < len(ls) && indentWidth(ls[i].text) > t.indent && strings.TrimSpace(ls[i].text) != ""; i++ {
			code := sc.isCode(ls[i].text)
			if !code && parseHead(ls[i]) != nil {
				break // a nested task is a task of its own
			}
			sc.advance(ls[i].text)
			bl := bodyLine{line: ls[i]}
			if !code {
				t.classify(&bl)
			}
			t.body = append(t.body, bl)
		}
		d.segs = append(d.segs, segment{task: t})
	}
	if text != nil {
		d.segs = append(d.segs, segment{lines: text})
	}
	return d
}

// parseHead recognises a task head line, or returns nil.
func parseHead(l line) *docTask {
	m := headRE.FindStringSubmatchIndex(l.text)
	if m == nil {
		return nil
	}
	num, err := strconv.Atoi(l.text[m[6]:m[7]])
	if err != nil {
		return nil
	}
	t := &docTask{
		prefix: l.text[:m[3]],
		box:    l.text[m[4]],
		suffix: l.text[m[4]+1:],
		indent: indentWidth(l.text),
		head:   l,
	}
	t.Num = num
	t.Status = boxStatus[t.box]
	if m[8] >= 0 {
		t.Title, t.Owner = splitOwner(l.text[m[8]:m[9]])
	}
	return t
}

// splitOwner takes a trailing "@name" off a title.
func splitOwner(rest string) (title, owner string) {
	i := strings.LastIndexAny(rest, " \t")
	last := rest[i+1:]
	if len(last) < 2 || last[0] != '@' {
		return rest, ""
	}
	return strings.TrimRight(rest[:i+1], " \t"), last[1:]
}

// classify marks a body line as a note, the link, or other text.
func (t *docTask) classify(bl *bodyLine) {
	if m := noteRE.FindStringSubmatch(bl.text); m != nil {
		layout := "2006-01-02 15:04"
		if len(m[2]) > 5 {
			layout += ":05"
		}
		at, err := time.Parse(layout, m[1]+" "+m[2])
		if err == nil {
			n := Note{At: at, Text: m[3]}
			if bm := byRE.FindStringSubmatch(n.Text); bm != nil {
				n.By, n.Text = bm[1], bm[2]
			}
			bl.kind, bl.note = bodyNote, n
			t.Notes = append(t.Notes, n)
			return
		}
	}
	if m := olderRE.FindStringSubmatch(bl.text); m != nil {
		bl.kind = bodyOlder
		t.Older, _ = strconv.Atoi(m[1])
		return
	}
	if t.Link == "" {
		if m := linkRE.FindStringSubmatch(bl.text); m != nil && m[1] != "" {
			bl.kind = bodyLink
			t.Link = m[1]
		}
	}
}

// indentWidth counts the columns before the first non-blank character;
// a tab moves to the next multiple of four, as in CommonMark.
func indentWidth(s string) int {
	w := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			w++
		case '\t':
			w += 4 - w%4
		default:
			return w
		}
	}
	return w
}

// scanner follows fenced code blocks and HTML comments, whose lines are
// never tasks: an example of the format inside ``` must stay an example.
type scanner struct {
	fence   string // the opening run ("```", "~~~~") while inside a fence
	comment bool   // inside <!-- … -->
}

// isCode reports whether the line belongs to a code block or a comment,
// including the line that opens one.
func (s scanner) isCode(text string) bool {
	if s.fence != "" || s.comment {
		return true
	}
	t := strings.TrimLeft(text, " \t")
	return fenceRun(t) != "" || strings.HasPrefix(t, "<!--")
}

// advance updates the state after the line.
func (s *scanner) advance(text string) {
	t := strings.TrimLeft(text, " \t")
	switch {
	case s.fence != "":
		if strings.HasPrefix(t, s.fence) && strings.TrimSpace(strings.TrimLeft(t, s.fence[:1])) == "" {
			s.fence = ""
		}
	case s.comment:
		s.comment = !strings.Contains(t, "-->")
	case fenceRun(t) != "":
		s.fence = fenceRun(t)
	case strings.HasPrefix(t, "<!--"):
		s.comment = !strings.Contains(t[4:], "-->")
	}
}

// fenceRun returns the run of backticks or tildes that opens a fence, or "".
func fenceRun(t string) string {
	if len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return ""
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 || (t[0] == '`' && strings.Contains(t[n:], "`")) {
		return ""
	}
	return t[:n]
}

// bytes renders the document, in one allocation: the server renders a
// board of a thousand tasks (a megabyte) on every change.
func (d *document) bytes() []byte {
	return d.render(0)
}

// render renders the document into a buffer of capacity hint (the size
// it had before a change), or of its exact size when hint is 0.
func (d *document) render(hint int) []byte {
	if hint <= 0 {
		d.eachLine(func(l *line) { hint += len(l.text) + len(l.eol) })
	}
	out := make([]byte, 0, hint)
	d.eachLine(func(l *line) { out = append(append(out, l.text...), l.eol...) })
	return out
}

// eachLine calls fn on every line in order.
func (d *document) eachLine(fn func(l *line)) {
	for i := range d.segs {
		seg := &d.segs[i]
		if seg.task == nil {
			for j := range seg.lines {
				fn(&seg.lines[j])
			}
			continue
		}
		fn(&seg.task.head)
		for j := range seg.task.body {
			fn(&seg.task.body[j].line)
		}
	}
}

// all returns the lines of a segment in order.
func (s segment) all() []line {
	if s.task == nil {
		return s.lines
	}
	ls := make([]line, 0, 1+len(s.task.body))
	ls = append(ls, s.task.head)
	for _, bl := range s.task.body {
		ls = append(ls, bl.line)
	}
	return ls
}

// tasks returns the task blocks in file order.
func (d *document) tasks() []*docTask {
	var ts []*docTask
	for _, seg := range d.segs {
		if seg.task != nil {
			ts = append(ts, seg.task)
		}
	}
	return ts
}
