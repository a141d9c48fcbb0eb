package workspace

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// TreeSource streams a workspace's tree as tree records
// (sandbox/runner/proto): the session's runner, inside its jail, or, for a
// directory no jail has seen yet, HostTree.
type TreeSource interface {
	// Tree starts the stream. known are the keys (proto.StampKey, 8
	// bytes each) of the files whose content the audit has already.
	Tree(ctx context.Context, args proto.TreeArgs, known []byte) (TreeStream, error)
}

// TreeStream is one tree stream: its records, then its result.
type TreeStream interface {
	io.Reader
	// Result waits for the end of the stream and returns its result or
	// error.
	Result() (proto.TreeResult, error)
	// Close gives the stream up.
	Close()
}

// HostTree is the tree of dir walked by this process, with the runner's
// walker (sandbox/runner.WalkTree). Use it only for a directory no jail
// has seen yet, such as a fresh clone before its first jail starts:
// nothing can change the tree while it is walked, so the walk races
// nothing. Once a jail has started, the session's runner walks the tree.
func HostTree(dir string) TreeSource { return hostTree(dir) }

type hostTree string

func (d hostTree) Tree(ctx context.Context, args proto.TreeArgs, known []byte) (TreeStream, error) {
	fd, err := unix.Open(string(d), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", d, err)
	}
	keys := make([]uint64, 0, len(known)/8)
	for i := 0; i+8 <= len(known); i += 8 {
		keys = append(keys, binary.BigEndian.Uint64(known[i:]))
	}
	slices.Sort(keys)
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	hs := &hostStream{PipeReader: pr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(hs.done)
		hs.res.Left, hs.err = runner.WalkTree(ctx, fd, args, keys, pw)
		pw.CloseWithError(hs.err)
	}()
	return hs, nil
}

type hostStream struct {
	*io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	res    proto.TreeResult
	err    error
}

func (h *hostStream) Result() (proto.TreeResult, error) {
	<-h.done
	return h.res, h.err
}

func (h *hostStream) Close() {
	h.cancel()
	h.PipeReader.Close()
	<-h.done
}
