package kuberunner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/workspace"
)

// Limits of a session's first content as it is sent to its pod.
const (
	// seedPiece is how much of the tree one unpack call carries (a
	// piece may be larger by one file): the runner holds a call's input
	// in memory until it is written.
	seedPiece = 8 << 20
	// seedMaxEntries and seedMaxDepth bound the tree sent.
	seedMaxEntries = 1 << 20
	seedMaxDepth   = 256
)

// seed sends the tree of the host directory ws (the clone or directory
// the server made for the session, which no jail has seen) to the runner
// at conn, which writes it under the pod's workspace (proto.OpUnpack).
// The tree goes in pieces, each a whole tree from the root (the
// directories the piece is in, opened again), so that neither side holds
// more than a piece and one file. Sending it again is harmless: the
// runner keeps the directories and links already there and writes the
// files again.
func seed(ctx context.Context, conn *client.Conn, ws *os.File) error {
	src := workspace.HostTree(fmt.Sprintf("/proc/self/fd/%d", ws.Fd()))
	lim := proto.TreeArgs{MaxEntries: seedMaxEntries, MaxDepth: seedMaxDepth, MaxFileBytes: proto.MaxFileLimit, MaxReadBytes: proto.MaxUnpackBytes}
	st, err := src.Tree(ctx, lim, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	s := &seeder{ctx: ctx, conn: conn}
	r := proto.NewTreeReader(st, proto.TreeLimits{MaxEntries: lim.MaxEntries, MaxDepth: lim.MaxDepth, MaxFileBytes: lim.MaxFileBytes, MaxReadBytes: lim.MaxReadBytes})
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the session's first content: %w", err)
		}
		if err := s.add(r, rec); err != nil {
			return err
		}
	}
	res, err := st.Result()
	if err != nil {
		return fmt.Errorf("read the session's first content: %w", err)
	}
	if res.Left > 0 {
		return errs.New(errs.Limit, fmt.Sprintf("the workspace has more than %d entries: too many to copy into its sandbox", seedMaxEntries))
	}
	return s.flush(true)
}

// seeder gathers tree records into pieces and sends them.
type seeder struct {
	ctx  context.Context
	conn *client.Conn
	buf  []byte
	dirs []string // the directories the next record is in
	sent int      // pieces sent
}

func (s *seeder) add(r *proto.TreeReader, rec proto.TreeRecord) error {
	switch rec.Kind {
	case proto.RecDir:
		s.buf = proto.AppendDir(s.buf, rec.Name)
		s.dirs = append(s.dirs, rec.Name)
		return nil
	case proto.RecEnd:
		s.buf = proto.AppendEnd(s.buf)
		s.dirs = s.dirs[:len(s.dirs)-1]
	case proto.RecLink:
		s.buf = proto.AppendLink(s.buf, rec.Name, rec.Target)
	case proto.RecSkip:
		return nil // a socket, FIFO or device: nothing a pod could use
	case proto.RecFile:
		if rec.Flag != proto.ContentSent {
			p := strings.Join(append(s.dirs[:len(s.dirs):len(s.dirs)], rec.Name), "/")
			return errs.New(errs.Limit, fmt.Sprintf("%s is over %d MiB: too large to copy into the session's sandbox", p, proto.MaxFileLimit>>20))
		}
		s.buf = proto.AppendFile(s.buf, rec.Name, rec.Stamp, proto.ContentSent)
		n := len(s.buf)
		s.buf = append(s.buf, make([]byte, rec.Stamp.Size)...)
		if _, err := io.ReadFull(rec.Content, s.buf[n:]); err != nil {
			return fmt.Errorf("read the session's first content: %w", err)
		}
		if _, err := r.EndContent(); err != nil {
			return fmt.Errorf("read the session's first content: %w", err)
		}
		s.buf = append(s.buf, 1)
	}
	if len(s.buf) < seedPiece {
		return nil
	}
	return s.flush(false)
}

// flush sends what was gathered as a whole tree, closing the directories
// it is in, and opens them again for the next piece; last sends even an
// empty tree, so that an empty workspace is a workspace written.
func (s *seeder) flush(last bool) error {
	if !last || len(s.buf) > 0 || s.sent == 0 {
		for range s.dirs {
			s.buf = proto.AppendEnd(s.buf)
		}
		args := proto.UnpackArgs{Root: sandbox.MountPoint, MaxEntries: proto.MaxUnpackEntries, MaxDepth: proto.MaxUnpackDepth, MaxBytes: proto.MaxUnpackBytes}
		var res proto.UnpackResult
		if err := s.conn.Call(s.ctx, proto.OpUnpack, args, s.buf, &res); err != nil {
			return fmt.Errorf("write the session's first content into its sandbox: %w", err)
		}
		s.sent++
	}
	s.buf = s.buf[:0]
	for _, d := range s.dirs {
		s.buf = proto.AppendDir(s.buf, d)
	}
	return nil
}
