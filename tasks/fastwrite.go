package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"time"
)

// A server's Board writes the file after every change before the change
// returns (see writeThrough), so that write must cost little on a board
// of any size. A whole sync reads and parses the file, loads every task
// and rewrites the sync base; but when the file is still exactly the one
// this Board wrote last (same inode, size and times), there is no hand
// edit to merge: the fast write keeps that file's document and base in
// memory, takes the tasks changed since as their changes left them,
// rewrites their lines, and replaces the file through the same
// descriptor-based, no-follow write as a sync. The base it leaves is saved to the database in the background
// (Board.background). Until then a whole sync of this Board merges against
// the base kept here; another process's merges against the database's,
// older one, where the file and the board agree on what was written since.

// fileCache is what a Board knows of the file it wrote last. It is only
// used under the Board's lock.
type fileCache struct {
	sig     string       // the file's signature after the write
	cur     current      // its bytes, which the next write expects to find
	doc     *document    // its parsed form
	base    map[int]item // what it says of each task: the sync base
	dbSig   string       // the file signature the database holds
	unsaved bool         // base and sig are newer than the database's
	spare   []byte       // the buffer of the write before: the next one renders into it
	// conflicts are the tasks the file and the board disagree on, as the
	// sync that read the file found them: only a sync that reads a hand
	// edit finds new ones, and a hand edit makes the next write a sync.
	conflicts map[int]bool
	wrote     time.Time // when the last fast write was made
	since     time.Time // when the first write not saved yet was made
}

// maxUnsaved bounds how long a busy server leaves the sync base of its
// writes unsaved: saving it costs a megabyte on a big board, so it waits
// for a pause in the changes, but not for ever.
const maxUnsaved = 5 * time.Second

// saveDue says whether the background sync should save the base now,
// rather than wait for changes to pause.
func (c *fileCache) saveDue(pause time.Duration) bool {
	return time.Since(c.wrote) >= pause || time.Since(c.since) >= maxUnsaved
}

// keepCache remembers the file a whole sync left, for the fast writes of a
// server's Board (Options.Coalesce); a CLI's Board writes once and exits.
func (b *Board) keepCache(st *state, out []byte, stamp FileStamp) {
	if b.coalesce <= 0 {
		return
	}
	base := st.newBase()
	sig := stamp.sig()
	b.cache = &fileCache{sig: sig, cur: currentOf(out, stamp), doc: st.doc, base: base, dbSig: sig,
		conflicts: maps.Clone(st.conflicts)}
}

// fastSync writes the dirty tasks, as their changes left them, into the
// file this Board wrote last: no database read. It reports false, having
// changed nothing, when that takes a whole sync: the file changed since,
// or a new task would not read back.
func (b *Board) fastSync(ctx context.Context, dirty map[int]*item) (bool, error) {
	c := b.cache
	// On failure, the base stays (the ancestor of the file for the whole
	// sync that follows) but the document goes: it may be half changed,
	// and the file is to be read again anyway.
	defer func() {
		if b.cache == nil {
			c.doc = nil
			b.cache = c
		}
	}()
	b.cache = nil // kept whole only on success
	// No look at the file first: the write is a compare-and-write
	// against the file this Board wrote last, and fails, changing
	// nothing, when a hand edit replaced it; the whole sync then merges
	// it. (A look would cost a round trip to the board's runner.)
	nums := make([]int, 0, len(dirty))
	for n := range dirty {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	changed := map[int]item{}
	start, oldLen, one := 0, 0, -1 // the span of the one task set, for splice
	for _, n := range nums {
		d := *dirty[n]
		old, inB := c.base[n]
		if c.conflicts[n] || inB && equalItems(old, d) {
			continue
		}
		t := c.doc.find(n)
		switch {
		case inB && t != nil:
			start, oldLen = c.doc.span(t)
			c.doc.set(t, d)
			one = n
		case !inB && t == nil:
			c.doc.insert(d)
			if c.doc.codeAt(c.doc.find(n)) {
				return false, nil // the whole sync says why it cannot be written
			}
		default:
			return false, nil
		}
		changed[n] = d
	}
	if len(changed) == 0 {
		b.cache = c
		return true, nil
	}
	var out []byte
	if len(changed) == 1 && one >= 0 {
		out = c.doc.splice(c.spare[:0], c.cur.raw, start, oldLen, c.doc.find(one))
	} else {
		out = c.doc.render(len(c.cur.raw) + 4096)
	}
	b.at("rendered")
	if b.beforeWrite != nil {
		b.beforeWrite()
	}
	written, err := b.write(ctx, out, c.cur)
	if err != nil {
		return false, nil // a hand edit since, or the whole sync reports it
	}
	b.setWritten(written.sig())
	// The old bytes are garbage now, but their buffer renders the next write.
	c.spare = c.cur.raw
	for n, d := range changed {
		c.base[n] = d
	}
	if !c.unsaved {
		c.since = time.Now()
	}
	c.sig, c.cur, c.unsaved, c.wrote = written.sig(), currentOf(out, written), true, time.Now()
	b.cache = c
	return true, nil
}

// itemOf is task t as the file shows it: its last shownNotes notes, and
// the count of the others.
func itemOf(t Task) item {
	n, _ := parseID(t.ID)
	it := item{Num: n, Title: t.Title, Status: t.Status, Owner: t.Owner, Link: t.Link, Notes: []Note{}}
	older := max(0, len(t.Notes)-shownNotes)
	it.Notes = append(it.Notes, t.Notes[older:]...)
	it.Older = older
	return it
}

// saveCache saves the base and signature of the fast writes, if the
// database still holds what this Board saved last.
func (b *Board) saveCache(ctx context.Context) error {
	c := b.cache
	raw, err := json.Marshal(c.base)
	if err != nil {
		return fmt.Errorf("encode sync base: %w", err)
	}
	res, err := b.db.ExecContext(ctx, `UPDATE task_boards SET base = ?, file_sig = ?, synced_at = ? WHERE id = ? AND file_sig = ?`,
		string(raw), c.sig, ms(b.now()), b.id, c.dbSig)
	if err != nil {
		return fmt.Errorf("save board: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		b.cache = nil // another process synced: a whole sync merges
		return fmt.Errorf("save board: the board was synced elsewhere")
	}
	c.dbSig, c.unsaved = c.sig, false
	b.at("settled")
	return nil
}

// span returns where task t's lines are in the rendered document.
func (d *document) span(t *docTask) (start, length int) {
	at := 0
	for _, seg := range d.segs {
		n := seg.size()
		if seg.task == t {
			return at, n
		}
		at += n
	}
	return at, 0
}

// size is the length of a segment's lines, rendered.
func (s segment) size() int {
	n := 0
	if s.task == nil {
		for _, l := range s.lines {
			n += len(l.text) + len(l.eol)
		}
		return n
	}
	n = len(s.task.head.text) + len(s.task.head.eol)
	for _, bl := range s.task.body {
		n += len(bl.text) + len(bl.eol)
	}
	return n
}

// splice renders the document into dst from raw, the rendering it had
// before one task was set, and that task's new block t, which had length
// bytes at start: one copy of the file, not a walk over every line. Setting a
// task changes no line outside its block (a terminator added by fixEOLs
// only ever goes on a line before it, which already has one).
func (d *document) splice(dst, raw []byte, start, length int, t *docTask) []byte {
	n := 0
	for _, l := range (segment{task: t}).all() {
		n += len(l.text) + len(l.eol)
	}
	out := dst[:0]
	if cap(out) < len(raw)-length+n {
		out = make([]byte, 0, len(raw)-length+n+4096)
	}
	out = append(out, raw[:start]...)
	for _, l := range (segment{task: t}).all() {
		out = append(append(out, l.text...), l.eol...)
	}
	return append(out, raw[start+length:]...)
}

// codeAt reports whether task t's head line is inside a code block or a
// comment, where it would not read back as a task.
func (d *document) codeAt(t *docTask) bool {
	var sc scanner
	for _, seg := range d.segs {
		if seg.task == t {
			return sc.isCode(t.head.text)
		}
		for _, l := range seg.all() {
			sc.advance(l.text)
		}
	}
	return true
}
