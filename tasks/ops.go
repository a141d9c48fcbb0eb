package tasks

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Sync merges hand edits of the file into the board and writes the
// board's changes to the file. Conflicting tasks are left as they are on
// both sides and returned in the report and as a *ConflictError (code
// CodeConflict); everything else is merged. A file that uses one id twice
// is refused with CodeInvalid and nothing changes.
func (b *Board) Sync(ctx context.Context) (SyncReport, error) {
	st, err := b.sync(ctx, nil, nil)
	if st == nil {
		return SyncReport{}, err
	}
	if err != nil {
		return st.report, err
	}
	if len(st.report.Conflicts) > 0 {
		return st.report, &ConflictError{Path: b.path, Conflicts: st.report.Conflicts}
	}
	return st.report, nil
}

// Resolve settles a conflict on one task by keeping one side.
func (b *Board) Resolve(ctx context.Context, id string, keep Side) (Task, error) {
	n, err := parseID(id)
	if err != nil {
		return Task{}, err
	}
	if keep != KeepFile && keep != KeepBoard {
		return Task{}, invalidf("resolve %s: keep the file or the board", taskID(n))
	}
	st, err := b.sync(ctx, map[int]Side{n: keep}, func(st *state) error {
		if !st.resolved[n] {
			return &Error{Code: CodeInvalid, TaskID: taskID(n), Message: taskID(n) + " has no conflict to resolve"}
		}
		return nil
	})
	if st == nil {
		return Task{}, err
	}
	if _, ok := st.db[n]; !ok {
		return Task{ID: taskID(n)}, err // the deletion won
	}
	got, lerr := loadTasks(ctx, b.db, b.id, []int{n}, st.now)
	if lerr != nil {
		return Task{}, lerr
	}
	return got[n], err
}

// List syncs with the file and returns the tasks that match f, by id,
// with all their notes. Tasks in conflict are listed with their board
// version and Conflict set. A list only reads: when the file cannot be
// read or written, or the database cannot be written (a full disk), the
// tasks still come back, from the database, with an error that matches
// ErrNotWritten and says why.
func (b *Board) List(ctx context.Context, f Filter) ([]Task, error) {
	if f.Status != "" {
		if _, err := ParseStatus(string(f.Status)); err != nil {
			return nil, err
		}
	}
	owner := strings.TrimPrefix(strings.TrimSpace(f.Owner), "@")
	conflicts, warn, err := b.read(ctx)
	if err != nil {
		return nil, err
	}
	all, err := loadTasks(ctx, b.db, b.id, nil, b.now().UTC())
	if err != nil {
		return nil, err
	}
	nums := make([]int, 0, len(all))
	for n := range all {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	out := []Task{}
	for _, n := range nums {
		t := all[n]
		if (f.Status == "" || t.Status == f.Status) && (owner == "" || strings.EqualFold(t.Owner, owner)) {
			t.Conflict = conflicts[n]
			out = append(out, t)
		}
	}
	return out, warn
}

// read syncs before a read and returns the tasks in conflict. A sync that
// fails for any reason but a file the board cannot read as tasks is a
// warning: the database still answers.
func (b *Board) read(ctx context.Context) (map[int]bool, error, error) {
	st, err := b.sync(ctx, nil, nil)
	if st != nil {
		if err != nil && !errors.Is(err, ErrConflict) {
			return st.conflicts, unwritten(b.path, err), nil
		}
		return st.conflicts, nil, nil
	}
	if ErrorCode(err) == CodeInvalid {
		return nil, nil, err
	}
	_, conflicts, ferr := fileState(ctx, b.db, b.id)
	if ferr != nil {
		return nil, nil, ferr
	}
	return conflicts, &readError{path: b.path, err: err}, nil
}

// readError is a sync that failed before a read, which went on from the
// database.
type readError struct {
	path string
	err  error
}

func (e *readError) Error() string {
	return fmt.Sprintf("listed from the board's database: %s could not be synced (the next sync retries): %v", e.path, e.err)
}

func (e *readError) Unwrap() []error { return []error{ErrNotWritten, e.err} }

// Get syncs with the file and returns one task; a task in conflict is
// returned with its board version and Conflict set. Like List, it works
// when the file or the database cannot be written, with a warning.
func (b *Board) Get(ctx context.Context, id string) (Task, error) {
	n, err := parseID(id)
	if err != nil {
		return Task{}, err
	}
	conflicts, warn, err := b.read(ctx)
	if err != nil {
		return Task{}, err
	}
	got, err := loadTasks(ctx, b.db, b.id, []int{n}, b.now().UTC())
	if err != nil {
		return Task{}, err
	}
	t, ok := got[n]
	if !ok {
		return Task{}, notFound(n)
	}
	t.Conflict = conflicts[n]
	return t, warn
}

// checkTitle refuses titles the file could not carry back unchanged.
func checkTitle(title string) error {
	if title == "" {
		return invalidf("title is empty: say what the task is")
	}
	if err := checkText("title", title); err != nil {
		return err
	}
	if _, owner := splitOwner(title); owner != "" {
		return invalidf("title %q ends with an @name, which the file would read as the owner", title)
	}
	return nil
}

// Update changes a task's status, appends a note and records a link.
// While someone holds a live claim on the task only that holder may update
// it, and marking a task done requires holding its claim; done releases
// the claim. Notes are stamped with the board's clock and by.User.
func (b *Board) Update(ctx context.Context, id string, c Change, by Holder) (Task, error) {
	n, err := parseID(id)
	if err != nil {
		return Task{}, err
	}
	if c.Status != "" {
		if c.Status, err = ParseStatus(string(c.Status)); err != nil {
			return Task{}, err
		}
	}
	c.Note, c.Link = strings.TrimSpace(c.Note), strings.TrimSpace(c.Link)
	if c.Status == "" && c.Note == "" && c.Link == "" {
		return Task{}, invalidf("update %s: nothing to change: give a status, a note or a link", taskID(n))
	}
	if err := checkText("note", c.Note); err != nil {
		return Task{}, err
	}
	if err := checkText("link", c.Link); err != nil {
		return Task{}, err
	}
	if by.User != "" {
		if err := checkUser(by.User); err != nil {
			return Task{}, err
		}
	}
	return b.change(ctx, n, func(ctx context.Context, e *edit) error {
		held, err := e.checkHolder(ctx, by)
		if err != nil {
			return err
		}
		if c.Status == StatusDone && !held {
			return &Error{Code: CodeClaimed, TaskID: taskID(n), Message: taskID(n) + " is not claimed: claim it before marking it done"}
		}
		if c.Status != "" {
			e.it.Status = c.Status
		}
		if c.Link != "" {
			e.it.Link = c.Link
		}
		e.changed = true
		if c.Note != "" {
			e.note = &Note{At: e.now.Truncate(time.Minute), By: by.User, Text: c.Note}
		}
		return nil
	})
}
