package proto

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

var testLimits = TreeLimits{MaxEntries: 100, MaxDepth: 8, MaxFileBytes: 1 << 10, MaxReadBytes: 4 << 10}

// readAll reads every record of a stream, its content included, and
// returns the paths it named.
func readAll(b []byte, lim TreeLimits) ([]string, error) {
	t := NewTreeReader(bytes.NewReader(b), lim)
	var dirs []string
	var out []string
	for {
		rec, err := t.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		switch rec.Kind {
		case RecEnd:
			dirs = dirs[:len(dirs)-1]
		case RecDir:
			dirs = append(dirs, rec.Name)
			out = append(out, strings.Join(dirs, "/"))
		default:
			out = append(out, strings.Join(append(dirs[:len(dirs):len(dirs)], rec.Name), "/"))
			if rec.Content != nil {
				if _, err := io.Copy(io.Discard, rec.Content); err != nil {
					return out, err
				}
			}
		}
	}
}

func file(b []byte, name, content string) []byte {
	b = AppendFile(b, name, Stamp{Mode: 0o100644, Size: int64(len(content))}, ContentSent)
	return append(append(b, content...), 1)
}

func TestTreeReaderReadsAWellFormedStream(t *testing.T) {
	var b []byte
	b = file(b, "a.txt", "hello\n")
	b = AppendDir(b, "d")
	b = AppendLink(b, "link", "../a.txt")
	b = AppendSkip(b, "pipe", SkipSpecial)
	b = AppendEnd(b)
	b = AppendFile(b, "known", Stamp{Size: 1 << 30}, ContentKnown)
	got, err := readAll(b, testLimits)
	want := "a.txt d d/link d/pipe known"
	if err != nil || strings.Join(got, " ") != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

// A runner's stream is refused, not followed, when it names a path out of
// the tree, repeats an entry, or goes past a limit.
func TestTreeReaderRefusesWhatALyingRunnerSends(t *testing.T) {
	cases := map[string][]byte{
		"dot-dot":          file(nil, "..", "x"),
		"dot":              AppendDir(nil, "."),
		"slash":            file(nil, "a/../../etc/passwd", "x"),
		"absolute":         file(nil, "/etc/passwd", "x"),
		"nul":              file(nil, "a\x00b", "x"),
		"empty name":       file(nil, "", "x"),
		"duplicate":        file(file(nil, "a", "x"), "a", "y"),
		"out of order":     file(file(nil, "b", "x"), "a", "y"),
		"end at root":      AppendEnd(nil),
		"ends inside dir":  AppendDir(nil, "d"),
		"bad kind":         {'z'},
		"bad flag":         AppendFile(nil, "a", Stamp{}, 7),
		"bad skip":         AppendSkip(nil, "a", 99),
		"negative size":    AppendFile(nil, "a", Stamp{Size: -1}, ContentKnown),
		"file over cap":    AppendFile(nil, "a", Stamp{Size: 2 << 10}, ContentSent),
		"short content":    append(AppendFile(nil, "a", Stamp{Size: 10}, ContentSent), "abc"...),
		"bad still byte":   append(append(AppendFile(nil, "a", Stamp{Size: 1}, ContentSent), 'x'), 9),
		"link nul target":  AppendLink(nil, "l", "a\x00"),
		"link empty":       AppendLink(nil, "l", ""),
		"truncated record": AppendFile(nil, "a", Stamp{}, ContentKnown)[:10],
		"name too long":    append([]byte{RecFile, 0x01, 0x00}, bytes.Repeat([]byte("a"), 256)...),
	}
	deep := []byte{}
	for range 9 {
		deep = AppendDir(deep, "d")
	}
	cases["too deep"] = deep
	many := []byte{}
	for i := range 101 {
		many = AppendFile(many, string(rune('A'+i/26))+string(rune('a'+i%26)), Stamp{}, ContentKnown)
	}
	cases["too many entries"] = many
	total := []byte{}
	for i := range 5 {
		total = file(total, string(rune('a'+i)), strings.Repeat("x", 1000))
	}
	cases["over the read cap"] = total
	for name, b := range cases {
		if _, err := readAll(b, testLimits); !errors.Is(err, ErrTree) {
			t.Errorf("%s: %v, want a refusal of the stream", name, err)
		}
	}
}

// An endless stream stops at the limits, whatever it repeats.
func TestTreeReaderStopsAnEndlessStream(t *testing.T) {
	r := io.MultiReader(bytes.NewReader(AppendDir(nil, "a")), endless{AppendEnd(AppendDir(nil, "x"))})
	tr := NewTreeReader(r, testLimits)
	n := 0
	for {
		_, err := tr.Next()
		if err != nil {
			if !errors.Is(err, ErrTree) {
				t.Fatalf("after %d records: %v", n, err)
			}
			break
		}
		n++
		if n > 10*testLimits.MaxEntries {
			t.Fatal("the reader never stopped an endless stream")
		}
	}
}

type endless struct{ b []byte }

func (e endless) Read(p []byte) (int, error) {
	n := 0
	for n+len(e.b) <= len(p) {
		n += copy(p[n:], e.b)
	}
	if n == 0 {
		n = copy(p, e.b)
	}
	return n, nil
}

// FuzzTreeReader: whatever a runner sends, the reader returns names that
// are one clean path component each, within the limits, or an error; it
// never panics.
func FuzzTreeReader(f *testing.F) {
	var ok []byte
	ok = file(ok, "a", "hi")
	ok = AppendDir(ok, "d")
	ok = AppendLink(ok, "l", "/etc")
	ok = AppendSkip(ok, "s", SkipRaced)
	ok = AppendEnd(ok)
	f.Add(ok)
	f.Add(file(nil, "..", "x"))
	f.Add(AppendDir(AppendDir(nil, "a"), "b"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr := NewTreeReader(bytes.NewReader(b), testLimits)
		entries := 0
		var read int64
		for {
			rec, err := tr.Next()
			if err != nil {
				return
			}
			if rec.Kind == RecEnd {
				continue
			}
			entries++
			if entries > testLimits.MaxEntries || tr.Depth() > testLimits.MaxDepth {
				t.Fatalf("past the limits: %d entries, depth %d", entries, tr.Depth())
			}
			if rec.Name == "" || rec.Name == "." || rec.Name == ".." || strings.ContainsAny(rec.Name, "/\x00") || len(rec.Name) > MaxNameBytes {
				t.Fatalf("a name that is not one component: %q", rec.Name)
			}
			if rec.Content != nil {
				n, _ := io.Copy(io.Discard, rec.Content)
				read += n
				if read > testLimits.MaxReadBytes || n > testLimits.MaxFileBytes {
					t.Fatalf("content past the caps: %d of %d", n, read)
				}
			}
		}
	})
}
