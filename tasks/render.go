package tasks

import (
	"strconv"
	"strings"
)

// Rewriting touches only the task being changed: its head line is rebuilt
// (or just its status box swapped), its notes and link lines are rewritten
// in place, and every other line under it is kept as written.

// taskID formats a task number as people see it.
func taskID(num int) string { return "T-" + strconv.Itoa(num) }

// headText renders the part of a head line after the status box.
func headText(it item) string {
	s := "] " + taskID(it.Num)
	if it.Title != "" {
		s += " " + it.Title
	}
	if it.Owner != "" {
		s += " @" + it.Owner
	}
	return s
}

// noteText renders a note line without its indentation.
func noteText(n Note) string {
	layout := "2006-01-02 15:04"
	if n.At.Second() != 0 {
		layout += ":05"
	}
	s := "- " + n.At.UTC().Format(layout)
	if n.By != "" {
		s += " @" + n.By + ":"
	}
	if n.Text != "" {
		s += " " + n.Text
	}
	return s
}

// olderText renders the line that counts the notes the file leaves out.
func olderText(n int) string {
	if n == 1 {
		return "- 1 older note on the board (task_list)"
	}
	return "- " + strconv.Itoa(n) + " older notes on the board (task_list)"
}

// find returns the task block with the given number, or nil.
func (d *document) find(num int) *docTask {
	for _, seg := range d.segs {
		if seg.task != nil && seg.task.Num == num {
			return seg.task
		}
	}
	return nil
}

// set rewrites task t so that it says it.
func (d *document) set(t *docTask, it item) {
	eol := t.head.eol
	if eol == "" {
		eol = d.eol
	}
	box := t.box
	if boxStatus[box] != it.Status {
		box = statusBox[it.Status]
	}
	suffix := t.suffix
	if it.Title != t.Title || it.Owner != t.Owner {
		suffix = headText(it)
	}
	head := line{text: t.prefix + string(box) + suffix, eol: t.head.eol}

	indent := strings.Repeat(" ", t.indent+2)
	for _, bl := range t.body {
		if bl.kind != bodyText {
			indent = bl.text[:len(bl.text)-len(strings.TrimLeft(bl.text, " \t"))]
			break
		}
	}
	var out []line
	next, firstNote, lastNote, linkAt, linkDone := 0, -1, -1, -1, false
	for _, bl := range t.body {
		switch bl.kind {
		case bodyOlder:
			// Dropped here, written afresh above the first note.
		case bodyNote:
			if next < len(it.Notes) {
				n := it.Notes[next]
				if n.equal(bl.note) {
					out = append(out, bl.line)
				} else {
					out = append(out, line{indent + noteText(n), eol})
				}
				next++
				lastNote = len(out) - 1
				if firstNote < 0 {
					firstNote = lastNote
				}
			}
		case bodyLink:
			linkDone = true
			if it.Link != "" {
				l := bl.line
				if it.Link != t.Link {
					l = line{indent + "- link: " + it.Link, eol}
				}
				out = append(out, l)
				linkAt = len(out) - 1
			}
		default:
			out = append(out, bl.line)
		}
	}
	// New notes go after the last note, else before the link, else right
	// under the head: never after other lines, which may open a code block.
	var fresh []line
	for ; next < len(it.Notes); next++ {
		fresh = append(fresh, line{indent + noteText(it.Notes[next]), eol})
	}
	if !linkDone && it.Link != "" {
		fresh = append(fresh, line{indent + "- link: " + it.Link, eol})
	}
	at := 0
	switch {
	case lastNote >= 0:
		at = lastNote + 1
	case linkAt >= 0:
		at = linkAt
	}
	out = append(out[:at], append(fresh, out[at:]...)...)
	if it.Older > 0 && len(it.Notes) > 0 {
		if firstNote < 0 {
			firstNote = at
		}
		older := line{indent + olderText(it.Older), eol}
		out = append(out[:firstNote], append([]line{older}, out[firstNote:]...)...)
	}
	d.replace(t, append([]line{head}, out...))
}

// replace swaps task t's lines for ls, re-parsed so that the document
// describes exactly what it will render.
func (d *document) replace(t *docTask, ls []line) {
	for i, seg := range d.segs {
		if seg.task == t {
			d.segs[i] = segment{task: parseBlock(ls, t.lineNo)}
			d.fixEOLs()
			return
		}
	}
}

// parseBlock parses lines that form one task block.
func parseBlock(ls []line, lineNo int) *docTask {
	t := parseHead(ls[0])
	t.lineNo = lineNo
	var sc scanner // a head is never code, so the block starts outside any
	for _, l := range ls[1:] {
		bl := bodyLine{line: l}
		if !sc.isCode(l.text) {
			t.classify(&bl)
		}
		sc.advance(l.text)
		t.body = append(t.body, bl)
	}
	return t
}

// insert adds a task after the last task block, or at the end.
func (d *document) insert(it item) {
	marker, at := "- [", len(d.segs)
	for i := len(d.segs) - 1; i >= 0; i-- {
		if t := d.segs[i].task; t != nil {
			if m := strings.TrimLeft(t.prefix, " \t"); m[0] == '*' || m[0] == '+' {
				marker = m[:1] + " ["
			}
			at = i + 1
			break
		}
	}
	var ls []line
	if at == len(d.segs) && at > 0 && d.tasks() == nil {
		// Separate the first task from a preceding paragraph.
		last := d.segs[at-1].all()
		if l := last[len(last)-1].text; strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#") {
			ls = append(ls, line{"", d.eol})
		}
	}
	t := &docTask{prefix: marker, box: statusBox[it.Status], suffix: headText(it), head: line{eol: d.eol}}
	t.head.text = t.prefix + string(t.box) + t.suffix
	t.item = item{Num: it.Num, Title: it.Title, Status: it.Status, Owner: it.Owner}
	seg := segment{task: t}
	d.segs = append(d.segs[:at], append([]segment{seg}, d.segs[at:]...)...)
	if ls != nil {
		d.segs = append(d.segs[:at], append([]segment{{lines: ls}}, d.segs[at:]...)...)
	}
	d.set(t, it)
}

// remove deletes a task block and the lines under it.
func (d *document) remove(t *docTask) {
	for i, seg := range d.segs {
		if seg.task == t {
			d.segs = append(d.segs[:i], d.segs[i+1:]...)
			d.fixEOLs()
			return
		}
	}
}

// fixEOLs keeps lines apart after an edit and keeps the input's choice of
// ending with or without a final terminator.
func (d *document) fixEOLs() {
	var last *line
	for i := range d.segs {
		seg := &d.segs[i]
		if seg.task == nil {
			for j := range seg.lines {
				if last != nil && last.eol == "" {
					last.eol = d.eol
				}
				last = &seg.lines[j]
			}
			continue
		}
		if last != nil && last.eol == "" {
			last.eol = d.eol
		}
		last = &seg.task.head
		for j := range seg.task.body {
			if last.eol == "" {
				last.eol = d.eol
			}
			last = &seg.task.body[j].line
		}
	}
	if last == nil {
		return
	}
	switch {
	case !d.finalEOL:
		last.eol = ""
	case last.eol == "":
		last.eol = d.eol
	}
}
