package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/errs"
)

// pair serves ops on one end of a socket pair and returns a client on the
// other.
func pair(t *testing.T, ops map[string]Handler) *client.Conn {
	t.Helper()
	a, b := net.Pipe()
	go func() { _ = NewServer(ops).Serve(b); b.Close() }()
	c := client.New(a)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestPingAndUnknownOp(t *testing.T) {
	c := pair(t, Ops())
	ctx := context.Background()
	var res proto.PingResult
	if err := c.Call(ctx, proto.OpPing, proto.PingArgs{}, nil, &res); err != nil || res.PID <= 0 {
		t.Fatalf("ping: %+v %v", res, err)
	}
	err := c.Call(ctx, "nope", nil, nil, nil)
	if errs.CodeOf(err) != errs.Invalid {
		t.Fatalf("unknown op: %v (code %s)", err, errs.CodeOf(err))
	}
}

// A stream whose output nobody reads does not hold up another call: the
// runner stops at its credit, and the connection stays free.
func TestStreamsDoNotBlockEachOther(t *testing.T) {
	release := make(chan struct{})
	ops := map[string]Handler{
		"flood": func(c *Call) (any, error) {
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for {
				if _, err := c.Out.Write(chunk); err != nil {
					return nil, err
				}
				select {
				case <-release:
					return nil, nil
				default:
				}
			}
		},
		"echo": func(c *Call) (any, error) {
			b, err := io.ReadAll(c.In)
			if err != nil {
				return nil, err
			}
			_, err = c.Out.Write(b)
			return map[string]int{"n": len(b)}, err
		},
	}
	c := pair(t, ops)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	flood, err := c.Open(ctx, "flood", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Let the flood fill its credit.
	time.Sleep(100 * time.Millisecond)
	in := bytes.Repeat([]byte("abc"), 1<<20) // 3 MiB: several frames each way
	st, err := c.Open(ctx, "echo", nil, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(st)
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ N int }
	if err := st.Result(&res); err != nil || res.N != len(in) || !bytes.Equal(got, in) {
		t.Fatalf("echo behind a flood: n=%d got %d bytes, err %v", res.N, len(got), err)
	}
	close(release)
	flood.Close()
}

// A cancelled call ends its handler's context.
func TestCancelReachesTheHandler(t *testing.T) {
	ended := make(chan error, 1)
	c := pair(t, map[string]Handler{"wait": func(c *Call) (any, error) {
		<-c.Ctx.Done()
		ended <- c.Ctx.Err()
		return nil, c.Ctx.Err()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := c.Open(ctx, "wait", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never saw the cancellation")
	}
	st.Close()
}

// A runner that lies (a hello of another protocol, a frame the protocol
// does not allow) is dropped, and calls fail with ErrGone.
func TestLyingRunnerIsDropped(t *testing.T) {
	a, b := net.Pipe()
	c := client.New(a)
	defer c.Close()
	go func() {
		f, _ := proto.AppendFrame(nil, proto.Frame{Kind: proto.Hello, Head: []byte(`{"protocol":99,"ops":[]}`)})
		b.Write(f)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Hello(ctx); !errors.Is(err, client.ErrGone) {
		t.Fatalf("hello of protocol 99: %v", err)
	}
}
