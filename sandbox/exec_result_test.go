package sandbox

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

func record(tag byte, body string) []byte {
	b := []byte{tag, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(body)))
	return append(b, body...)
}

// readAll feeds stream to a recordReader in pieces of size n.
func readAll(stream []byte, n int) (*ended, bool, bool) {
	c := &ended{out: [2]*capBuffer{newCapBuffer(64 << 10), newCapBuffer(64 << 10)}}
	r := recordReader{c: c}
	for len(stream) > 0 {
		k := min(n, len(stream))
		if !r.feed(stream[:k]) {
			return c, false, r.whole()
		}
		stream = stream[k:]
	}
	return c, true, r.whole()
}

// What the runner sends is split into records whatever the frames'
// boundaries; a record the protocol does not have, a second or oversized
// exports record, or a stream cut inside a record is refused.
func TestRecordReaderRefusesWhatTheProtocolHasNot(t *testing.T) {
	good := bytes.Join([][]byte{record(proto.RecStdout, "out\n"), record(proto.RecStderr, "err\n"),
		record(proto.RecStdout, ""), record(proto.RecExports, "export A='1'\n")}, nil)
	for n := 1; n <= len(good); n++ {
		c, ok, whole := readAll(good, n)
		if !ok || !whole || string(c.out[0].bytes()) != "out\n" || string(c.out[1].bytes()) != "err\n" ||
			!c.gotExp || string(c.exports) != "export A='1'\n" {
			t.Fatalf("pieces of %d: ok %v whole %v stdout %q stderr %q exports %q", n, ok, whole, c.out[0].bytes(), c.out[1].bytes(), c.exports)
		}
	}
	huge := []byte{proto.RecExports, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(huge[1:], proto.StatusCap+1)
	for name, stream := range map[string][]byte{
		"unknown tag":        record(9, "x"),
		"two exports":        append(record(proto.RecExports, "a"), record(proto.RecExports, "b")...),
		"exports over bound": huge,
	} {
		if _, ok, _ := readAll(stream, 3); ok {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, ok, whole := readAll(good[:len(good)-2], 7); !ok || whole {
		t.Errorf("a stream cut inside a record: ok %v whole %v, want it seen as not whole", ok, whole)
	}
}

// The directory a runner reports is taken only when it can be the shell's.
func TestValidCwd(t *testing.T) {
	for cwd, want := range map[string]bool{
		"/workspace": true, "/tmp/x y": true, "": false, "relative": false, "/a\x00b": false,
		"/" + strings.Repeat("a", proto.MaxCwd): false,
	} {
		if got := validCwd(cwd); got != want {
			t.Errorf("validCwd(%.20q) = %v, want %v", cwd, got, want)
		}
	}
}

// FuzzRecordReader: whatever a runner sends, the server neither crashes
// nor holds more than the bounds, and how the bytes were cut into frames
// changes nothing.
func FuzzRecordReader(f *testing.F) {
	f.Add(record(proto.RecStdout, "hi\n"), 1)
	f.Add(append(record(proto.RecStderr, "e"), record(proto.RecExports, "export X='y'\n")...), 4)
	f.Add([]byte{3, 255, 255, 255, 255}, 2)
	f.Add([]byte{1, 0, 0}, 1)
	f.Fuzz(func(t *testing.T, stream []byte, n int) {
		if n <= 0 || n > 1<<16 {
			n = 1 + len(stream)
		}
		a, okA, wholeA := readAll(stream, n)
		b, okB, wholeB := readAll(stream, len(stream)+1)
		if okA != okB || (okA && wholeA != wholeB) {
			t.Fatalf("cut in %d-byte pieces: ok %v whole %v; whole stream: ok %v whole %v", n, okA, wholeA, okB, wholeB)
		}
		if okA && (!bytes.Equal(a.out[0].bytes(), b.out[0].bytes()) || !bytes.Equal(a.exports, b.exports)) {
			t.Fatal("the pieces changed what was read")
		}
		if len(a.exports) > proto.StatusCap {
			t.Fatalf("exports of %d bytes held", len(a.exports))
		}
	})
}
