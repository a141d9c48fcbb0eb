package tasks

import (
	"context"
	"fmt"
	"time"
)

// Notes are the record of what agents and people did: once the board has
// acknowledged one, no merge drops it. A note missing from the file is
// not taken as deleted, because the file may be a copy saved from before
// the note was written (an editor that opened the file, then a sync that
// added the note, then the editor saving over it): that copy looks exactly
// like a hand deletion. So a merge keeps every note the board has, adds
// the notes typed into the file, and takes a note whose text was changed
// by hand (same time and author) as an edit of that note.

// mergeNotes merges the shown notes of one task: base is what the file
// said after the last sync, file what it says now, board what the board
// shows. older lists the board's notes before those shown, read only when
// the file has notes that base has not (an old copy of the file may show
// notes that have since scrolled out of the shown ones).
func mergeNotes(base, file, board []Note, older func() ([]Note, error)) ([]Note, error) {
	added := subtract(file, base)
	if len(added) == 0 {
		return board, nil
	}
	removed := subtract(base, file)
	out := append([]Note(nil), board...)
	var fresh []Note
	for _, a := range added {
		if i := pairOf(removed, a); i >= 0 {
			r := removed[i]
			removed = append(removed[:i], removed[i+1:]...)
			if j := indexNote(out, r); j >= 0 {
				out[j] = a // the text edited by hand
				continue
			}
		}
		fresh = append(fresh, a)
	}
	if len(fresh) == 0 {
		return out, nil
	}
	var old []Note
	if older != nil {
		var err error
		if old, err = older(); err != nil {
			return nil, err
		}
	}
	// A note the board already has (shown or older) is not added again:
	// count each kind of note, and add only what the file has more of.
	have := append(append([]Note(nil), old...), out...)
	for _, a := range fresh {
		if i := indexNote(have, a); i >= 0 {
			have = append(have[:i], have[i+1:]...)
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

// subtract returns the notes of a that b does not have, counting repeats.
func subtract(a, b []Note) []Note {
	rest := append([]Note(nil), b...)
	var out []Note
	for _, n := range a {
		if i := indexNote(rest, n); i >= 0 {
			rest = append(rest[:i], rest[i+1:]...)
			continue
		}
		out = append(out, n)
	}
	return out
}

func indexNote(ns []Note, n Note) int {
	for i := range ns {
		if ns[i].equal(n) {
			return i
		}
	}
	return -1
}

// pairOf finds the note that a hand edit of n's text replaced: one with
// the same time and author, and of those the one whose text n's shares
// the most of (its start and end), since an edit usually fixes a part.
func pairOf(removed []Note, n Note) int {
	best, score := -1, -1
	for i, r := range removed {
		if !r.At.Equal(n.At) || r.By != n.By {
			continue
		}
		if s := shared(r.Text, n.Text); s > score {
			best, score = i, s
		}
	}
	return best
}

// shared counts the bytes a and b share at their start and at their end.
func shared(a, b string) int {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	return p + s
}

// olderNotes reads the notes of task num that the file does not show.
func olderNotes(ctx context.Context, q querier, id int64, num, count int) ([]Note, error) {
	if count <= 0 {
		return nil, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT at, author, text FROM task_notes WHERE board_id = ? AND num = ? ORDER BY seq LIMIT ?`, id, num, count)
	if err != nil {
		return nil, fmt.Errorf("load notes of %s: %w", taskID(num), err)
	}
	defer rows.Close()
	var out []Note
	for rows.Next() {
		var at int64
		var n Note
		if err := rows.Scan(&at, &n.By, &n.Text); err != nil {
			return nil, fmt.Errorf("scan note: %w", err)
		}
		n.At = time.UnixMilli(at).UTC()
		out = append(out, n)
	}
	return out, rows.Err()
}
