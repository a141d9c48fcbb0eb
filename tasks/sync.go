package tasks

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"
)

// A sync is a three-way merge. The base is what the file said after the
// last sync; a task that differs from it only in the file was edited by
// hand and goes to the board, one that differs only on the board is
// written to the file, and one that differs on both sides in different
// ways is a conflict: both sides are left alone and the base is kept, so
// the conflict stays reported until someone settles it.

// Side picks the version that wins when resolving a conflict.
type Side int

// The sides of a conflict.
const (
	KeepFile  Side = iota + 1 // the hand edit in TASKS.md wins
	KeepBoard                 // the board's version is written to the file
)

// Conflict is a task changed both in the file and on the board since the
// last sync. A nil version means the task was deleted on that side.
type Conflict struct {
	TaskID string
	File   *Task
	Board  *Task
}

// SyncReport says what a sync did.
type SyncReport struct {
	Imported  []string // tasks added or edited by hand in the file, now on the board
	Removed   []string // tasks deleted from the file, now gone from the board
	Written   bool     // whether the file was rewritten
	Conflicts []Conflict
}

// current is the file as a sync read it: its bytes and its stamp.
type current struct {
	raw    []byte
	exists bool
	sig    string // stamp.sig()
	stamp  FileStamp
}

func currentOf(raw []byte, s FileStamp) current {
	return current{raw: raw, exists: s.Exists, sig: s.sig(), stamp: s}
}

// state is one read-merge-write cycle.
type state struct {
	board     *Board
	now       time.Time
	doc       *document
	row       boardRow // the board as the cycle found it
	base      map[int]item
	file      map[int]item
	db        map[int]item
	conflicts map[int]bool
	dirty     map[int]bool // board tasks to save (or delete when absent from db)
	resolve   map[int]Side // conflicts to settle in this cycle
	resolved  map[int]bool
	nextNum   int
	inFile    bool // the file holds the rendered board
	report    SyncReport
	ctx       context.Context
	q         querier    // the merge's transaction
	prev      *fileCache // what this Board wrote last, if it knows
}

// check is run by Resolve inside a cycle, after the merge.
type check func(st *state) error

// sync merges the file into the board and writes the board's changes to
// the file. Hand edits are taken in a short write transaction; the file
// is read, rendered and written outside any database transaction. One
// sync at a time writes a board's file, across processes (see lock). If
// the file changes between our read and our rename, the cycle starts
// again, so a hand edit is never lost to a race.
func (b *Board) sync(ctx context.Context, resolve map[int]Side, fn check) (*state, error) {
	unlock, err := b.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return b.syncLocked(ctx, resolve, fn, false)
}

// syncLocked is sync under the lock. With fast, the changes made by this
// Board since the last sync are written without a whole sync when the
// file is still the one it wrote last (see fastSync).
func (b *Board) syncLocked(ctx context.Context, resolve map[int]Side, fn check, fast bool) (*state, error) {
	gen, dirty := b.takeDirty()
	if fast && resolve == nil && fn == nil && b.cache != nil && b.cache.doc != nil {
		if ok, err := b.fastSync(ctx, dirty); ok {
			b.finish(gen, err)
			return nil, err
		}
	}
	// What this Board wrote last is the ancestor of the file until a sync
	// saves a new base; a sync that stops before that keeps it.
	prev := b.cache
	b.cache = nil
	defer func() {
		if b.cache == nil && prev != nil {
			prev.doc = nil // the file is to be read again
			b.cache = prev
		}
	}()
	for range 5 {
		st, err := b.syncOnce(ctx, resolve, fn, prev)
		if !errors.Is(err, errFileChanged) {
			if st != nil {
				prev = nil // it saved the base: the board's row says it now
			}
			b.finish(gen, err)
			return st, err
		}
	}
	err := fmt.Errorf("write %s: the file kept changing while it was being rewritten; try again", b.path)
	b.finish(gen, err)
	return nil, err
}

// fileError is a file that could not be read: the board carries on from
// the database, and says so.
type fileError struct{ err error }

func (e *fileError) Error() string { return e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

func (b *Board) syncOnce(ctx context.Context, resolve map[int]Side, fn check, prev *fileCache) (*state, error) {
	b.at("open")
	cur, err := b.readSettled(ctx)
	if err != nil {
		return nil, &fileError{err}
	}
	b.at("read")
	st := &state{board: b, now: b.now().UTC(), doc: parse(cur.raw), resolve: resolve, prev: prev}
	if st.file, err = fileItems(st.doc, b.path); err != nil {
		return nil, err
	}
	b.at("parsed")
	// Most syncs have no hand edit to take: they only read the database,
	// which also works on a full disk.
	if err := b.merge(ctx, st, cur.exists, false); err != nil {
		return nil, err
	}
	b.at("loaded")
	if len(st.dirty) > 0 || st.nextNum > st.row.next {
		if err := b.merge(ctx, st, cur.exists, true); err != nil {
			return nil, err
		}
	}
	b.at("merged")
	if fn != nil {
		if err := fn(st); err != nil {
			return nil, err
		}
	}
	out := st.render()
	b.at("rendered")
	var writeErr error
	stamp := cur.stamp
	st.inFile = bytes.Equal(out, cur.raw) && cur.exists
	if !cur.exists && len(st.db) == 0 {
		// An empty board and no file agree: creating docs/TASKS.md in a
		// workspace that never used the board would only litter it.
		st.inFile = true
	}
	if !st.inFile {
		writeErr = st.verify(out)
		if writeErr == nil {
			if b.beforeWrite != nil {
				b.beforeWrite()
			}
			var written FileStamp
			written, writeErr = b.write(ctx, out, cur)
			if writeErr == nil {
				stamp = written
				b.setWritten(stamp.sig())
			}
		}
		if errors.Is(writeErr, errFileChanged) {
			return nil, writeErr // merge the new hand edit
		}
		st.report.Written = writeErr == nil
		st.inFile = st.report.Written
	}
	// The board is the source of truth, so its changes stand even when
	// the file cannot be written; the base then still says what the file
	// says, and the next sync writes the changes or reports a conflict.
	if err := saveSynced(ctx, b.db, b.id, st.row, st.newBase(), stamp.sig(), st.conflicts, st.now); err != nil {
		return nil, err
	}
	b.at("saved")
	if writeErr != nil {
		return st, &unwrittenError{path: b.path, err: writeErr}
	}
	if st.inFile && cur.exists || st.report.Written {
		b.keepCache(st, out, stamp)
	}
	return st, nil
}

// settleTime is how long a file must have been left alone before its
// hand edits are taken: an editor that saves in place truncates the file
// and then writes it, and a read in between sees tasks missing.
const settleTime = 50 * time.Millisecond

// readSettled reads the file once nobody has written it for settleTime,
// waiting at most about a second; this Board's own writes are complete
// and need no wait.
func (b *Board) readSettled(ctx context.Context) (current, error) {
	for i := 0; ; i++ {
		raw, s, err := b.file.Read(ctx)
		if err != nil {
			return current{}, err
		}
		cur := currentOf(raw, s)
		if !cur.exists || b.wrote(cur.sig) || i >= 20 {
			return cur, nil
		}
		age := time.Since(time.Unix(0, s.Ctime))
		if age >= b.settle || age < -time.Second {
			return cur, nil // settled, or a clock that went back: read as is
		}
		time.Sleep(b.settle - age)
	}
}

// merge loads the board and merges the file into it. With write, it runs
// in a write transaction and saves the hand edits.
func (b *Board) merge(ctx context.Context, st *state, exists, write bool) error {
	opts := &sql.TxOptions{ReadOnly: true}
	if write {
		opts = writeTx
	}
	tx, err := b.db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin sync: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after commit
	if st.row, err = loadBoard(ctx, tx, b.id); err != nil {
		return err
	}
	st.base, st.nextNum = st.row.base, st.row.next
	if p := st.prev; p != nil && p.unsaved && st.row.sig == p.dbSig {
		// The base of this Board's last writes, not saved yet: what the
		// file said before any hand edit since.
		st.base = map[int]item{}
		for n, it := range p.base {
			st.base[n] = it
		}
	}
	if !exists {
		// A missing file is no hand edit: it is written afresh.
		st.file = st.base
	}
	if st.db, err = loadItems(ctx, tx, b.id, nil); err != nil {
		return err
	}
	st.conflicts, st.dirty, st.resolved = map[int]bool{}, map[int]bool{}, map[int]bool{}
	st.report = SyncReport{}
	st.ctx, st.q = ctx, tx
	if err := st.merge(); err != nil {
		return err
	}
	if !write {
		return nil
	}
	if err := st.flush(ctx, tx); err != nil {
		return err
	}
	if err := saveNext(ctx, tx, b.id, st.nextNum); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit sync: %w", err)
	}
	return nil
}

// ErrNotWritten matches the error returned when a change was saved on the
// board but the file could not be written (or read); the next sync
// retries.
var ErrNotWritten = errors.New("saved on the board, but the task file was not written")

type unwrittenError struct {
	path string
	err  error
}

func (e *unwrittenError) Error() string {
	return fmt.Sprintf("saved on the board, but %s was not written (the next sync retries): %v", e.path, e.err)
}

func (e *unwrittenError) Unwrap() []error { return []error{ErrNotWritten, e.err} }

// unwritten turns a failed sync into the warning of a change that stands.
func unwritten(path string, err error) error {
	var u *unwrittenError
	if errors.As(err, &u) {
		return u
	}
	return &unwrittenError{path: path, err: err}
}

// verify re-reads what is about to be written: a task that would not read
// back as the board has it (say, below a code fence that never closes)
// must not reach the file, where the next sync would take it as deleted.
func (st *state) verify(out []byte) error {
	got, err := fileItems(parse(out), st.board.path)
	if err != nil {
		return err
	}
	for n, it := range st.db {
		if g, ok := got[n]; !st.conflicts[n] && (!ok || !equalItems(g, it)) {
			return fmt.Errorf("render %s: %s would not read back as written; is a code block left open above it?", st.board.path, taskID(n))
		}
	}
	return nil
}

// newBase is what the file says after this cycle: the board's tasks when
// the file holds them, the file's own when it could not be written; a conflict keeps its old
// ancestor so that it is seen again next time.
func (st *state) newBase() map[int]item {
	from := st.db
	if !st.inFile {
		from = st.file
	}
	base := map[int]item{}
	for n, it := range from {
		base[n] = it
	}
	for n := range st.conflicts {
		delete(base, n)
		if b, ok := st.base[n]; ok {
			base[n] = b
		}
	}
	return base
}

// fileItems indexes the document's tasks; an id used twice is an error
// because either copy could be the one that is meant.
func fileItems(d *document, path string) (map[int]item, error) {
	items := map[int]item{}
	lines := map[int]int{}
	for _, t := range d.tasks() {
		if first, dup := lines[t.Num]; dup {
			return nil, &Error{Code: CodeInvalid, TaskID: taskID(t.Num), Message: fmt.Sprintf(
				"%s: %s appears twice (lines %d and %d): give one of them a new id", path, taskID(t.Num), first, t.lineNo)}
		}
		lines[t.Num] = t.lineNo
		items[t.Num] = t.item
	}
	return items, nil
}

// merge takes hand edits from the file into st.db and finds conflicts.
// A task changed on both sides is merged field by field (title, status,
// owner, link) when no field changed on both sides in different ways;
// otherwise it is a conflict. Notes never conflict and are never dropped
// (see mergeNotes).
func (st *state) merge() error {
	for _, n := range union(st.base, st.file, st.db) {
		b, inB := st.base[n]
		f, inF := st.file[n]
		d, inD := st.db[n]
		side, resolving := st.resolve[n]
		var err error
		switch {
		case same(b, inB, f, inF), same(f, inF, d, inD):
			// No hand edit, or the same edit on both sides.
		case same(b, inB, d, inD):
			err = st.take(n, b, f, inF)
		case resolving:
			st.resolved[n] = true
			if side == KeepFile {
				err = st.take(n, b, f, inF)
			}
			// KeepBoard: render writes the board's version over the file's.
		default:
			if m, ok := mergeFields(b, f, d); inB && inF && inD && ok {
				err = st.take(n, b, m, true)
				break
			}
			st.conflicts[n] = true
			st.report.Conflicts = append(st.report.Conflicts, Conflict{TaskID: taskID(n), File: maybeTask(f, inF), Board: maybeTask(d, inD)})
		}
		if err != nil {
			return err
		}
		if n >= st.nextNum {
			st.nextNum = n + 1
		}
	}
	return nil
}

// mergeFields merges two descendants of b field by field. The notes are
// the file's: take merges them with the board's.
func mergeFields(b, f, d item) (item, bool) {
	m, ok := d, true
	pick := func(bv, fv, dv string) string {
		switch {
		case fv == bv || fv == dv:
			return dv
		case dv == bv:
			return fv
		}
		ok = false
		return dv
	}
	m.Title = pick(b.Title, f.Title, d.Title)
	m.Status = Status(pick(string(b.Status), string(f.Status), string(d.Status)))
	m.Owner = pick(b.Owner, f.Owner, d.Owner)
	m.Link = pick(b.Link, f.Link, d.Link)
	m.Notes = f.Notes
	return m, ok
}

// take puts the file's version f of task n (whose base is b) on the
// board. Its notes are merged with the board's: none the board has is
// dropped, and the notes the file does not show stay as they are.
func (st *state) take(n int, b, f item, inF bool) error {
	st.dirty[n] = true
	if !inF {
		delete(st.db, n)
		st.report.Removed = append(st.report.Removed, taskID(n))
		return nil
	}
	d, inD := st.db[n]
	if inD {
		notes, err := mergeNotes(b.Notes, f.Notes, d.Notes, func() ([]Note, error) {
			return olderNotes(st.ctx, st.q, st.board.id, n, d.Older)
		})
		if err != nil {
			return err
		}
		f.Notes, f.Older = notes, d.Older
	}
	st.db[n] = f
	st.report.Imported = append(st.report.Imported, taskID(n))
	return nil
}

// flush saves the dirty tasks.
func (st *state) flush(ctx context.Context, q querier) error {
	for _, n := range sortedKeys(st.dirty) {
		var err error
		if it, ok := st.db[n]; ok {
			err = saveItem(ctx, q, st.board.id, it, st.now)
		} else {
			err = deleteItem(ctx, q, st.board.id, n)
		}
		if err != nil {
			return err
		}
		delete(st.dirty, n)
	}
	return nil
}

// render writes the board's tasks into the document, leaving conflicts
// as the file has them.
func (st *state) render() []byte {
	for _, n := range union(st.db, st.docNums()) {
		if st.conflicts[n] {
			continue
		}
		d, inD := st.db[n]
		t := st.doc.find(n)
		switch {
		case inD && t == nil:
			st.doc.insert(d)
		case inD && !equalItems(t.item, d):
			st.doc.set(t, d)
		case !inD && t != nil:
			st.doc.remove(t)
		}
	}
	return st.doc.bytes()
}

func (st *state) docNums() map[int]item {
	m := map[int]item{}
	for _, t := range st.doc.tasks() {
		m[t.Num] = t.item
	}
	return m
}

func toTask(it item) Task {
	return Task{ID: taskID(it.Num), Title: it.Title, Status: it.Status, Owner: it.Owner, Link: it.Link,
		Notes: append([]Note(nil), it.Notes...)}
}

func maybeTask(it item, ok bool) *Task {
	if !ok {
		return nil
	}
	t := toTask(it)
	return &t
}

func same(a item, inA bool, b item, inB bool) bool {
	return inA == inB && (!inA || equalItems(a, b))
}

// equalItems compares what the file shows of two tasks; the count of
// older notes is not compared (it follows from the board).
func equalItems(a, b item) bool {
	return a.Num == b.Num && a.Title == b.Title && a.Status == b.Status && a.Owner == b.Owner && a.Link == b.Link && sameNotes(a.Notes, b.Notes)
}

func sameNotes(a, b []Note) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].equal(b[i]) {
			return false
		}
	}
	return true
}

func union(ms ...map[int]item) []int {
	seen := map[int]bool{}
	for _, m := range ms {
		for n := range m {
			seen[n] = true
		}
	}
	return sortedKeys(seen)
}

func sortedKeys(m map[int]bool) []int {
	ns := make([]int, 0, len(m))
	for n := range m {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	return ns
}
