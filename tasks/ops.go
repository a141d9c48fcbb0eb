package tasks

import (
	"context"
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
	st, err := b.run(ctx, nil, nil)
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
	st, err := b.run(ctx, map[int]Side{n: keep}, func(ctx context.Context, st *state) error {
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
	return st.task(n), err
}

// List syncs with the file and returns the tasks that match f, by id.
// Tasks in conflict are listed with their board version and Conflict set.
func (b *Board) List(ctx context.Context, f Filter) ([]Task, error) {
	if f.Status != "" {
		if _, err := ParseStatus(string(f.Status)); err != nil {
			return nil, err
		}
	}
	owner := strings.TrimPrefix(strings.TrimSpace(f.Owner), "@")
	st, err := b.run(ctx, nil, nil)
	if st == nil {
		return nil, err // a file that cannot be written does not stop a read
	}
	nums := make([]int, 0, len(st.db))
	for n := range st.db {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	out := []Task{}
	for _, n := range nums {
		it := st.db[n]
		if (f.Status == "" || it.Status == f.Status) && (owner == "" || strings.EqualFold(it.Owner, owner)) {
			out = append(out, st.task(n))
		}
	}
	return out, nil
}

// Get syncs with the file and returns one task; a task in conflict is
// returned with its board version and Conflict set.
func (b *Board) Get(ctx context.Context, id string) (Task, error) {
	n, err := parseID(id)
	if err != nil {
		return Task{}, err
	}
	st, err := b.run(ctx, nil, func(ctx context.Context, st *state) error {
		if _, ok := st.db[n]; !ok {
			return notFound(n)
		}
		return nil
	})
	if st == nil {
		return Task{}, err // a file that cannot be written does not stop a read
	}
	return st.task(n), nil
}

// Add creates an open task with the next free id and writes it to the file.
func (b *Board) Add(ctx context.Context, title string) (Task, error) {
	title = strings.TrimSpace(title)
	if err := checkTitle(title); err != nil {
		return Task{}, err
	}
	var num int
	st, err := b.run(ctx, nil, func(ctx context.Context, st *state) error {
		num = st.nextNum
		st.nextNum++
		st.db[num] = item{Num: num, Title: title, Status: StatusOpen}
		st.dirty[num] = true
		return nil
	})
	return result(st, num, err)
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
	st, err := b.run(ctx, nil, func(ctx context.Context, st *state) error {
		if err := st.need(n); err != nil {
			return err
		}
		held, err := st.checkHolder(ctx, n, by)
		if err != nil {
			return err
		}
		if c.Status == StatusDone && !held {
			return &Error{Code: CodeClaimed, TaskID: taskID(n), Message: taskID(n) + " is not claimed: claim it before marking it done"}
		}
		it := st.db[n]
		if c.Status != "" {
			it.Status = c.Status
		}
		if c.Link != "" {
			it.Link = c.Link
		}
		if c.Note != "" {
			it.Notes = append(append([]Note(nil), it.Notes...), Note{At: st.now.Truncate(time.Minute), By: by.User, Text: c.Note})
		}
		st.db[n] = it
		st.dirty[n] = true
		return nil
	})
	return result(st, n, err)
}

// result returns task n after a change; a change that was saved but not
// written to the file comes back with the task and ErrNotWritten.
func result(st *state, n int, err error) (Task, error) {
	if st == nil {
		return Task{}, err
	}
	return st.task(n), err
}

// need checks that task n exists and is not in conflict.
func (st *state) need(n int) error {
	if _, ok := st.db[n]; !ok {
		return notFound(n)
	}
	if st.conflicts[n] {
		return &ConflictError{Path: st.board.path, Conflicts: []Conflict{st.conflictOf(n)}}
	}
	return nil
}

func (st *state) conflictOf(n int) Conflict {
	for _, c := range st.report.Conflicts {
		if c.TaskID == taskID(n) {
			return c
		}
	}
	return Conflict{TaskID: taskID(n)}
}

// checkHolder fails when someone other than by holds a live claim on task
// n, and reports whether by holds it.
func (st *state) checkHolder(ctx context.Context, n int, by Holder) (bool, error) {
	c, err := liveClaim(ctx, st.tx, st.board.id, n, st.now)
	if err != nil || c == nil {
		return false, err
	}
	if c.Holder != by {
		return false, &ClaimedError{TaskID: taskID(n), Holder: c.Holder, Until: c.ExpiresAt}
	}
	return true, nil
}
