package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	in := Frame{Kind: Data, Flags: FlagLast, Stream: 7, Head: []byte(`{"a":1}`), Body: []byte("body")}
	b, err := AppendFrame(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ReadFrame(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if out.Kind != in.Kind || out.Flags != in.Flags || out.Stream != in.Stream || string(out.Head) != string(in.Head) || string(out.Body) != string(in.Body) {
		t.Fatalf("read %+v, wrote %+v", out, in)
	}
}

// A peer that announces a huge frame is refused before anything the size
// of it is allocated.
func TestFrameLengthsAreCheckedBeforeReading(t *testing.T) {
	for _, tc := range []struct{ head, body uint32 }{{MaxHead + 1, 0}, {0, MaxBody + 1}, {1 << 31, 1 << 31}} {
		h := []byte{byte(Data), 0}
		h = binary.BigEndian.AppendUint32(h, 1)
		h = binary.BigEndian.AppendUint32(h, tc.head)
		h = binary.BigEndian.AppendUint32(h, tc.body)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := ReadFrame(bytes.NewReader(h)); !errors.Is(err, ErrFrame) {
			t.Fatalf("head %d body %d: %v, want ErrFrame", tc.head, tc.body, err)
		}
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 4096 {
			t.Fatalf("refusing a %d+%d frame allocated %d bytes", tc.head, tc.body, n)
		}
	}
	if _, err := AppendFrame(nil, Frame{Kind: Data, Body: make([]byte, MaxBody+1)}); !errors.Is(err, ErrFrame) {
		t.Fatalf("writing an oversized frame: %v", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	good, _ := AppendFrame(nil, Frame{Kind: End, Stream: 3, Head: []byte(`{"result":{}}`)})
	f.Add(good)
	f.Add([]byte{9, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ReadFrame(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(fr.Head) > MaxHead || len(fr.Body) > MaxBody || !fr.Kind.valid() {
			t.Fatalf("accepted %+v", fr)
		}
		again, err := AppendFrame(nil, fr)
		if err != nil || !bytes.Equal(again, b[:len(again)]) {
			t.Fatalf("frame does not round-trip: %v", err)
		}
	})
}
