package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/errs"
)

// liar serves ops as a runner replaced by something in the jail would:
// whatever it likes, over a pipe.
func liar(t testing.TB, ops map[string]runner.Handler) Files {
	t.Helper()
	a, b := net.Pipe()
	go func() { _ = runner.NewServer(ops).Serve(b); b.Close() }()
	c := client.New(a)
	t.Cleanup(func() { c.Close() })
	return RunnerFiles(c)
}

// replying answers every call with result (raw JSON) after writing out.
func replying(out []byte, result string) runner.Handler {
	return func(c *runner.Call) (any, error) {
		if len(out) > 0 {
			if _, err := c.Out.Write(out); err != nil {
				return nil, err
			}
		}
		return json.RawMessage(result), nil
	}
}

// A runner that lies cannot make the server keep more than it asked for,
// nor believe a path outside the workspace, a size or count that does not
// fit, or a refusal the protocol does not know: each is an internal error
// that names the runner, and nothing it sent is handed on.
func TestALyingRunnerIsNotBelieved(t *testing.T) {
	ctx := context.Background()
	const limit = 1000
	big := bytes.Repeat([]byte("x"), 10*limit)
	read := func(out []byte, result string) (FileContent, error) {
		return liar(t, map[string]runner.Handler{proto.OpFileRead: replying(out, result)}).Read(ctx, "f", limit)
	}
	write := func(result string, opts WriteOptions) (FileWritten, error) {
		return liar(t, map[string]runner.Handler{proto.OpFileWrite: replying(nil, result)}).Write(ctx, "f", []byte("abc"), opts)
	}
	edit := func(result string) (FileEdited, error) {
		return liar(t, map[string]runner.Handler{proto.OpFileEdit: replying(nil, result)}).
			Edit(ctx, "f", EditOptions{Old: "a", New: "bb", Limit: limit, MaxGrow: -1})
	}
	longMsg := strings.Repeat("é", 10000)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"more than the limit", second(read(big, `{"jail":"/workspace/f","size":1000}`))},
		{"a size that is not what it sent", second(read([]byte("abc"), `{"jail":"/workspace/f","size":2}`))},
		{"a path outside the workspace", second(read([]byte("abc"), `{"jail":"/etc/passwd","size":3}`))},
		{"a path beside the workspace", second(read([]byte("abc"), `{"jail":"/workspacefoo/f","size":3}`))},
		{"a NUL in the path", second(read([]byte("abc"), `{"jail":"/workspace/f\u0000","size":3}`))},
		{"an overlong path", second(read(nil, `{"jail":"/workspace/`+strings.Repeat("a", 5000)+`","size":0}`))},
		{"no result", second(read(nil, `null`))},
		{"a result of another shape", second(read(nil, `{"jail":7}`))},
		{"an unknown fault", second(read(nil, `{"fault":{"kind":"pwned","op":"read","path":"f","message":"x"}}`))},
		{"a fault of an unknown op", second(read(nil, `{"fault":{"kind":"not_found","op":"chmod","path":"f","message":"x"}}`))},
		{"a fault outside", second(read(nil, `{"fault":{"kind":"not_found","op":"read","path":"f","jail":"/etc","message":"x"}}`))},
		{"too big under a limit not asked", second(read(nil, `{"fault":{"kind":"too_big","op":"read","path":"f","size":5,"limit":1,"message":"x"}}`))},
		{"too big under the limit", second(read(nil, `{"fault":{"kind":"too_big","op":"read","path":"f","size":5,"limit":1000,"message":"x"}}`))},
		{"sizes with a fault that has none", second(read(nil, `{"fault":{"kind":"not_found","op":"read","path":"f","size":5,"message":"x"}}`))},
		{"an unknown type", second(read(nil, `{"fault":{"kind":"not_regular","op":"read","path":"f","type":"door","message":"x"}}`))},
		{"a written size that is not what was sent", second(write(`{"jail":"/workspace/f","old_size":0,"size":99}`, WriteOptions{MaxGrow: -1}))},
		{"a negative size", second(write(`{"jail":"/workspace/f","old_size":-5,"size":3}`, WriteOptions{MaxGrow: -1}))},
		{"a refusal under the bound", second(write(`{"jail":"/workspace/f","old_size":0,"size":3,"refused":true}`, WriteOptions{MaxGrow: 10}))},
		{"a growth past the bound, written", second(write(`{"jail":"/workspace/f","old_size":0,"size":3}`, WriteOptions{MaxGrow: 1}))},
		{"a refusal with no bound", second(write(`{"jail":"/workspace/f","old_size":0,"size":3,"refused":true}`, WriteOptions{MaxGrow: -1}))},
		{"more replaced than found", second(edit(`{"jail":"/workspace/f","old_size":3,"size":4,"found":1,"replaced":2}`))},
		{"more found than fit", second(edit(`{"jail":"/workspace/f","old_size":3,"size":3,"found":9,"replaced":0}`))},
		{"an edit not made", second(edit(`{"jail":"/workspace/f","old_size":3,"size":3,"found":1,"replaced":0}`))},
		{"an edit of another size", second(edit(`{"jail":"/workspace/f","old_size":3,"size":9,"found":1,"replaced":1}`))},
		{"an old file over the limit", second(edit(`{"jail":"/workspace/f","old_size":5000,"size":5000,"found":0}`))},
	} {
		if tc.err == nil || errs.CodeOf(tc.err) != errs.Internal || !strings.Contains(tc.err.Error(), "runner") {
			t.Errorf("%s: %v (code %s), want an internal error naming the runner", tc.name, tc.err, errs.CodeOf(tc.err))
		}
	}

	// A fault's message is shown, cut to what the protocol allows.
	_, err := read(nil, `{"fault":{"kind":"not_found","op":"read","path":"f","jail":"/workspace/f","message":"`+longMsg+`"}}`)
	var fe *FileError
	if !errors.As(err, &fe) || len(fe.Message) > proto.MaxMessage+4 || !utf8.ValidString(fe.Message) || errs.CodeOf(err) != errs.NotFound {
		t.Errorf("a long fault: %v", err)
	}
}

// A runner that floods a read without end, or never answers, holds up
// neither the server's memory nor the call: the read stops one byte past
// its limit, and a call that gets no answer ends with its context.
func TestAFloodingOrSilentRunnerDoesNotHoldTheServer(t *testing.T) {
	flood := func(c *runner.Call) (any, error) {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for {
			if _, err := c.Out.Write(chunk); err != nil {
				return nil, err
			}
		}
	}
	silent := func(c *runner.Call) (any, error) {
		<-c.Ctx.Done()
		return nil, c.Ctx.Err()
	}
	f := liar(t, map[string]runner.Handler{proto.OpFileRead: flood, proto.OpFileWrite: silent})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only so that a regression fails, not hangs
	defer cancel()
	if _, err := f.Read(ctx, "f", 1<<20); err == nil || !strings.Contains(err.Error(), "more of the file than the limit") {
		t.Errorf("a flooding read: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if _, err := f.Write(short, "f", []byte("x"), WriteOptions{MaxGrow: -1}); err == nil {
		t.Error("a write the runner never answered succeeded")
	}
	if ctx.Err() != nil {
		t.Fatal("the calls hung")
	}
}

func second[T any](_ T, err error) error { return err }

// FuzzRunnerFileReplies feeds the server whatever a runner could answer a
// read, a write and an edit with: it never panics, and what it accepts
// keeps the promises (within the limit, under /workspace, consistent).
func FuzzRunnerFileReplies(f *testing.F) {
	for _, seed := range []string{
		`{"jail":"/workspace/f","size":3}`,
		`{"jail":"/workspace/f","old_size":0,"size":3}`,
		`{"jail":"/workspace/f","old_size":3,"size":4,"found":1,"replaced":1}`,
		`{"fault":{"kind":"too_big","op":"read","path":"f","size":5000,"limit":100,"message":"f is big"}}`,
		`{"fault":{"kind":"not_regular","op":"write","path":"f","jail":"/workspace/f","type":"dir","message":"x"}}`,
		`{"jail":"/workspace","exists":true,"type":"dir"}`,
		`null`, `[]`, `{"size":-1}`,
	} {
		f.Add([]byte("abc"), seed)
	}
	f.Fuzz(func(t *testing.T, out []byte, result string) {
		if len(out) > 4096 || len(result) > proto.MaxHead/2 {
			return
		}
		ops := map[string]runner.Handler{}
		for _, op := range []string{proto.OpFileRead, proto.OpFileWrite, proto.OpFileEdit, proto.OpFileStat} {
			ops[op] = func(c *runner.Call) (any, error) {
				_, _ = io.Copy(io.Discard, c.In)
				if op == proto.OpFileRead {
					_, _ = c.Out.Write(out)
				}
				if !json.Valid([]byte(result)) {
					return result, nil
				}
				return json.RawMessage(result), nil
			}
		}
		files := liar(t, ops)
		ctx := context.Background()
		const limit = 100
		if c, err := files.Read(ctx, "f", limit); err == nil {
			if len(c.Data) > limit || checkJail(c.Jail) != nil {
				t.Fatalf("accepted a read of %d bytes at %q", len(c.Data), c.Jail)
			}
		}
		if w, err := files.Write(ctx, "f", []byte("abc"), WriteOptions{MaxGrow: 2}); err == nil {
			if checkJail(w.Jail) != nil || w.Size != 3 || w.Refused != (w.Size-w.OldSize > 2) {
				t.Fatalf("accepted a write %+v", w)
			}
		}
		if e, err := files.Edit(ctx, "f", EditOptions{Old: "a", New: "b", Limit: limit, MaxGrow: -1}); err == nil {
			if e.Replaced > e.Found || e.Replaced < 0 || e.OldSize > limit || checkJail(e.Jail) != nil {
				t.Fatalf("accepted an edit %+v", e)
			}
		}
		if st, err := files.Stat(ctx, "f"); err == nil && (checkJail(st.Jail) != nil || st.Size < 0) {
			t.Fatalf("accepted a stat %+v", st)
		}
	})
}

// The runner finds the workspace where the jail mounts it, and the server
// checks the paths it names against the same place.
func TestRunnerAndJailAgreeOnTheMountPoint(t *testing.T) {
	if runner.MountPoint != sandbox.MountPoint {
		t.Fatalf("the runner looks for the workspace at %s, the jail mounts it at %s", runner.MountPoint, sandbox.MountPoint)
	}
}
