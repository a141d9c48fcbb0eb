package gitpush

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/warrenhq/warren/sessions/errs"
)

// build stores files (path → content; a trailing "/" makes an empty
// directory impossible, so none) as a tree and returns its hash.
func build(t *testing.T, st *memory.Storage, files map[string]string) plumbing.Hash {
	t.Helper()
	type dir map[string]any
	root := dir{}
	for p, content := range files {
		parts := strings.Split(p, "/")
		d := root
		for _, part := range parts[:len(parts)-1] {
			if d[part] == nil {
				d[part] = dir{}
			}
			d = d[part].(dir)
		}
		d[parts[len(parts)-1]] = content
	}
	m := &merger{st: st}
	var write func(d dir) plumbing.Hash
	write = func(d dir) plumbing.Hash {
		entries := map[string]object.TreeEntry{}
		for name, v := range d {
			switch x := v.(type) {
			case string:
				o := st.NewEncodedObject()
				o.SetType(plumbing.BlobObject)
				w, _ := o.Writer()
				w.Write([]byte(x))
				w.Close()
				h, _ := st.SetEncodedObject(o)
				entries[name] = object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h}
			case dir:
				entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: write(x)}
			}
		}
		h, err := m.write(entries)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	return write(root)
}

func files(t *testing.T, st *memory.Storage, h plumbing.Hash) map[string]string {
	t.Helper()
	tree, err := object.GetTree(st, h)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	tree.Files().ForEach(func(f *object.File) error {
		out[f.Name], _ = f.Contents()
		return nil
	})
	return out
}

// The push tree is the cloned tree with the workspace's changes: files
// the audit never recorded (the operator's exclusions) stay as the remote
// has them, every .git is dropped wherever it is, and deletions apply.
func TestMergeAppliesWorkspaceChangesOnly(t *testing.T) {
	st := memory.NewStorage()
	up := build(t, st, map[string]string{"README": "up\n", "vendor/big.bin": "excluded\n", "gone.txt": "x\n", "lib/a.go": "a\n"})
	base := build(t, st, map[string]string{"README": "up\n", "gone.txt": "x\n", "lib/a.go": "a\n",
		".git/config": "[core]\n", ".git/HEAD": "ref: refs/heads/main\n"})
	snap := build(t, st, map[string]string{"README": "changed\n", "lib/a.go": "a\n", "lib/b.go": "b\n",
		".git/config": "[url \"file:///evil/\"]\n\tinsteadOf = https://\n", ".git/hooks/pre-push": "#!/bin/sh\n",
		"new/.git/config": "x", "new/file": "kept\n", "only/.GIT/x": "y", ".Git": "z"})
	m := &merger{st: st}
	h, err := m.merge(up, base, snap, "")
	if err != nil {
		t.Fatal(err)
	}
	got := files(t, st, h)
	want := map[string]string{"README": "changed\n", "vendor/big.bin": "excluded\n", "lib/a.go": "a\n", "lib/b.go": "b\n",
		"new/file": "kept\n"}
	if len(got) != len(want) {
		t.Fatalf("pushed tree %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("pushed tree %v, want %v", got, want)
		}
	}
}

// A changed file the snapshot kept only as a size marker is refused: its
// marker must never be published as the file.
func TestMergeRefusesUnrecordedFile(t *testing.T) {
	st := memory.NewStorage()
	up := build(t, st, map[string]string{"README": "up\n"})
	base := build(t, st, map[string]string{"README": "up\n"})
	snap := build(t, st, map[string]string{"README": "up\n",
		"data.bin": "warren-audit: large file: 99999999 bytes, changed 2026-01-01T00:00:00Z, content not recorded: over the per-file cap of 16777216 bytes\n"})
	_, err := (&merger{st: st}).merge(up, base, snap, "")
	if errs.CodeOf(err) != errs.Limit || !strings.Contains(err.Error(), "data.bin") {
		t.Fatalf("marker pushed: %v", err)
	}
}

// missing carries what the parent's tree lacks, not what it has.
func TestMissingObjects(t *testing.T) {
	st := memory.NewStorage()
	a := build(t, st, map[string]string{"same/x": "1", "y": "2"})
	b := build(t, st, map[string]string{"same/x": "1", "y": "3"})
	got, err := missing(st, b, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 { // b's root tree and the new y; same/ is known
		t.Fatalf("missing %v", got)
	}
}
