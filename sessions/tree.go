package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
	"github.com/warrenhq/warren/sessions/bound"
	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/workspace"
)

// jailRunner is a Runner with a runner process inside its jail (the local
// bwrap runner): snapshots, diffs, copies and the quota's measure reach
// the workspace only through it, once a jail has started.
type jailRunner interface {
	// Runner returns the runner's connection, starting the jail if none
	// runs.
	Runner(ctx context.Context) (*client.Conn, error)
	// LiveRunner returns the running jail's runner, or nil; it never
	// starts one.
	LiveRunner() *client.Conn
}

// errNoJailRunner: the session's Runner has no runner process to walk its
// workspace with.
var errNoJailRunner = errs.New(errs.Internal, "this session's runner cannot stream its workspace")

// withTree runs fn with s's workspace as its runner walks it inside the
// jail, starting the jail if none runs. A jail started only for this, of a
// session that runs no commands now (paused, archived), is stopped again.
func (m *Manager) withTree(ctx context.Context, s *Session, fn func(workspace.TreeSource) error) error {
	// A workspace that no longer resolves where it may is refused, as on
	// every use, even though the jail binds the directory it checked.
	if err := m.guard(s); err != nil {
		return err
	}
	sh, err := m.Shell(s)
	if err != nil {
		return err
	}
	jr, ok := sh.(jailRunner)
	if !ok {
		return errNoJailRunner
	}
	wasRunning := sh.Running()
	conn, err := jr.Runner(ctx)
	if err != nil {
		return fmt.Errorf("reach the runner of session %s: %w", s.ID, err)
	}
	err = fn(runnerTree{conn})
	if !wasRunning {
		switch s.State() {
		case StateArchived, StateDeleted:
			m.dropShell(s.ID, true)
		case StatePaused:
			sh.Stop()
		}
	}
	return err
}

// runnerTree is a workspace as its runner streams it (proto.OpTree).
type runnerTree struct{ conn *client.Conn }

func (r runnerTree) Tree(ctx context.Context, args proto.TreeArgs, known []byte) (workspace.TreeStream, error) {
	args.Root = sandbox.MountPoint
	st, err := r.conn.Open(ctx, proto.OpTree, args, known)
	if err != nil {
		return nil, err
	}
	return runnerStream{st}, nil
}

type runnerStream struct{ *client.Stream }

func (s runnerStream) Result() (proto.TreeResult, error) {
	var r proto.TreeResult
	if err := s.Stream.Result(&r); err != nil {
		return proto.TreeResult{}, err
	}
	if r.Left < 0 {
		return proto.TreeResult{}, errs.New(errs.Internal, "the runner said it left out a negative number of entries")
	}
	return r, nil
}

// duTimeout bounds one measure by the runner: a runner that a command
// stopped (SIGSTOP) must not hold the session's quota lock for ever.
const duTimeout = time.Minute

// errNotMeasured: no runner could measure the session yet (its jail has
// not run since the server started).
var errNotMeasured = errs.New(errs.Unavailable, "the disk use is not measured yet (it is, once the session's jail runs)")

// runnerUsage measures s's workspace (unless bound) and home through the
// runner inside its jail: the server walks no workspace path. With start
// it starts the jail if none runs; without, it uses only a running one
// (for callers inside a command's turn) and fails with errNotMeasured.
// measured says whether the figure is the runner's (exact, or with err a
// lower bound); without it there is no figure.
func (m *Manager) runnerUsage(s *Session, start bool) (n int64, measured bool, err error) {
	var dirs []string
	if s.Mode != ModeBind { // a bound directory is the user's, not the session's
		dirs = append(dirs, sandbox.MountPoint)
	}
	if m.cfg.DataDir != "" {
		dirs = append(dirs, sandbox.HomeDir)
	}
	if len(dirs) == 0 {
		return 0, true, nil
	}
	var sh Runner
	if start {
		var err error
		if sh, err = m.Shell(s); err != nil {
			return 0, false, err
		}
	} else if sh = m.liveShell(s.ID); sh == nil {
		return 0, false, errNotMeasured
	}
	jr, ok := sh.(jailRunner)
	if !ok {
		return 0, false, errNoJailRunner
	}
	// A command runs (or its jail is starting): its jail's runner is the
	// one to ask. Waiting to start one would wait for the command, whose
	// end waits for the quota lock the caller holds.
	start = start && !sh.Busy()
	ctx, cancel := context.WithTimeout(context.Background(), duTimeout)
	defer cancel()
	var conn *client.Conn
	if start {
		var err error
		if conn, err = jr.Runner(ctx); err != nil {
			return 0, false, err
		}
	} else if conn = jr.LiveRunner(); conn == nil {
		return 0, false, errNotMeasured
	}
	var res proto.DiskUsageResult
	if err := conn.Call(ctx, proto.OpDiskUsage, proto.DiskUsageArgs{Dirs: dirs}, nil, &res); err != nil {
		return 0, false, err
	}
	return sumUsage(dirs, res)
}

// sumUsage checks the runner's answer and adds it up. The figures are the
// jail's word: see docs/SECURITY.md for what a lying runner can do.
func sumUsage(dirs []string, res proto.DiskUsageResult) (int64, bool, error) {
	if len(res.Bytes) != len(dirs) || len(res.Errors) != len(dirs) {
		return 0, false, errs.New(errs.Internal, "the runner's disk usage does not fit the directories asked for")
	}
	var total int64
	var errList []error
	for i, n := range res.Bytes {
		if n < 0 || n > 1<<60 {
			return 0, false, errs.New(errs.Internal, "the runner's disk usage is out of range")
		}
		total += n
		switch e := res.Errors[i]; {
		case e == "":
		case e == "missing" && dirs[i] == sandbox.HomeDir: // no home made yet
		default:
			errList = append(errList, fmt.Errorf("%s: %s", dirs[i], bound.String(e, 200)))
		}
	}
	return total, true, errors.Join(errList...)
}
