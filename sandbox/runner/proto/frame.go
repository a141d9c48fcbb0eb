// Package proto is the protocol between warren's server and the runner
// inside a jail (docs/runner-protocol.md): frames on one persistent
// stream, multiplexed by stream id, every part bounded before it is read.
//
// Both sides import it, so it imports nothing but the standard library:
// the runner is a small program of its own, one per jail.
package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol's version. The runner says it in its hello; the
// server refuses a runner that speaks another.
const Version = 1

// Limits of one frame. A reader checks the lengths in the frame's header
// before it allocates anything, so a peer that lies costs nothing.
const (
	// MaxHead bounds a frame's JSON header (a request, a reply, a hello).
	MaxHead = 64 << 10
	// MaxBody bounds a frame's raw bytes (a piece of a file, of output,
	// of a tree stream). Larger data goes as several Data frames.
	MaxBody = 1 << 20
	// headerLen is kind, flags, stream, head length and body length.
	headerLen = 1 + 1 + 4 + 4 + 4
)

// Kind says what a frame is.
type Kind uint8

// The kinds of frame.
const (
	// Hello is the runner's first frame, on stream 0: a Hello in Head.
	Hello Kind = 1
	// Open starts a stream (server to runner): a Request in Head, the
	// first piece of the request's input in Body.
	Open Kind = 2
	// Data carries more of a stream's bytes, in either direction.
	Data Kind = 3
	// End is the runner's last frame of a stream: a Reply in Head.
	End Kind = 4
	// Cancel asks the runner to stop a stream's work (server to runner);
	// the runner still ends the stream with End.
	Cancel Kind = 5
	// Credit lets the runner send Body more bytes on the stream (server to
	// runner; Body is a 4-byte big-endian count): flow control, so that
	// one stream's unread output never blocks the others.
	Credit Kind = 6
)

func (k Kind) valid() bool { return k >= Hello && k <= Credit }

// Flags of a frame.
const (
	// FlagLast marks the sender's last frame of the stream's input (on
	// Open or Data from the server). The runner's End is always last.
	FlagLast uint8 = 1
)

// Frame is one unit on the wire.
type Frame struct {
	Kind   Kind
	Flags  uint8
	Stream uint32
	Head   []byte // JSON, at most MaxHead bytes
	Body   []byte // raw bytes, at most MaxBody
}

// ErrFrame is what a malformed frame fails with: the peer broke the
// protocol, and the connection is done with.
var ErrFrame = errors.New("runner protocol: malformed frame")

// ReadFrame reads one frame. Lengths past the limits, an unknown kind or
// flags fail with ErrFrame before anything is allocated.
func ReadFrame(r io.Reader) (Frame, error) { return ReadFrameBuf(r, nil) }

// ReadFrameBuf is ReadFrame with the body's memory from alloc (nil: make),
// so that a reader of much output can reuse buffers: the body starts the
// buffer alloc gave, whatever the head (an End's reply) before it.
func ReadFrameBuf(r io.Reader, alloc func(n int) []byte) (Frame, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{Kind: Kind(h[0]), Flags: h[1], Stream: binary.BigEndian.Uint32(h[2:6])}
	headN, bodyN := binary.BigEndian.Uint32(h[6:10]), binary.BigEndian.Uint32(h[10:14])
	switch {
	case !f.Kind.valid():
		return Frame{}, fmt.Errorf("%w: kind %d", ErrFrame, h[0])
	case f.Flags&^FlagLast != 0:
		return Frame{}, fmt.Errorf("%w: flags %#x", ErrFrame, f.Flags)
	case headN > MaxHead:
		return Frame{}, fmt.Errorf("%w: a header of %d bytes (at most %d)", ErrFrame, headN, MaxHead)
	case bodyN > MaxBody:
		return Frame{}, fmt.Errorf("%w: a body of %d bytes (at most %d)", ErrFrame, bodyN, MaxBody)
	}
	if alloc == nil {
		buf := make([]byte, headN+bodyN)
		if err := readFull(r, buf); err != nil {
			return Frame{}, err
		}
		f.Head, f.Body = buf[:headN:headN], buf[headN:]
		return f, nil
	}
	f.Head, f.Body = make([]byte, headN), alloc(int(bodyN))
	if err := readFull(r, f.Head); err != nil {
		return Frame{}, err
	}
	if err := readFull(r, f.Body); err != nil {
		return Frame{}, err
	}
	return f, nil
}

// readFull fills buf from r: a frame cut short is io.ErrUnexpectedEOF.
func readFull(r io.Reader, buf []byte) error {
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// AppendFrame appends f's encoding to b. It fails, writing nothing, when a
// part is over its limit.
func AppendFrame(b []byte, f Frame) ([]byte, error) {
	if len(f.Head) > MaxHead || len(f.Body) > MaxBody {
		return b, fmt.Errorf("%w: a frame of %d+%d bytes is over the limits (%d+%d)", ErrFrame, len(f.Head), len(f.Body), MaxHead, MaxBody)
	}
	if !f.Kind.valid() || f.Flags&^FlagLast != 0 {
		return b, fmt.Errorf("%w: kind %d flags %#x", ErrFrame, f.Kind, f.Flags)
	}
	b = append(b, byte(f.Kind), f.Flags)
	b = binary.BigEndian.AppendUint32(b, f.Stream)
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.Head)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.Body)))
	b = append(b, f.Head...)
	return append(b, f.Body...), nil
}
