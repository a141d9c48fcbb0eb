package sandbox

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Shell is a persistent /bin/sh in a bubblewrap jail. It starts on the
// first Exec, runs one command at a time (concurrent callers queue), keeps
// cd and export effects between commands, and restarts itself with the
// saved state when the shell dies. The zero value is not usable: call
// NewShell.
type Shell struct {
	profile Profile
	bwrap   string
	cred    *syscall.Credential
	owner   [2]int // host uid/gid that owns the jail's files

	turn chan struct{} // a token: whoever holds it may run a command

	// mu protects the fields below.
	mu    sync.Mutex
	jail  *jail
	cg    *cgroup
	cgErr error      // why the jail has no cgroup, once tried
	user  *userGroup // the jails of Profile.User, nil without one
	state State
	// stateVersion counts the changes of state (StateVersion).
	stateVersion uint64
	exports      []byte // the `export -p` that state.Env was parsed from,
	parsed       bool   // once a command has reported one (not a restored state)
	closed       bool
	prepared     bool          // the workspace was handed to the jail's uid
	fsize        fileSizeLimit // RLIMIT_FSIZE set by LimitFileSize, and whether the jail has it
	notes        []string      // lines for the stderr of the next result (StopAll)
	after        func() string // Options.AfterCommand
	ws           *os.File      // the workspace directory, bound by descriptor
	runner       string        // the runner's binary (FindRunner)
	dial         Dialer        // a runner on the network instead of a jail (NewNetShell)
}

// Options tune NewShell.
type Options struct {
	// State restores a saved working directory and exports on first start.
	State *State
	// Bwrap is the bubblewrap binary; empty means "bwrap" on PATH.
	Bwrap string
	// NoCgroup skips the per-jail cgroup even when the host offers one.
	NoCgroup bool
	// AfterCommand, when set, runs after every command, before its result
	// is returned, with the shell's turn held; a non-empty string it
	// returns is added as a line to the result's stderr. The session
	// manager measures disk use there.
	AfterCommand func() string
	// Runner is the runner's binary; empty means FindRunner's choice.
	Runner string
	// Workspace is Profile.Workspace opened (and checked) by the caller;
	// NewShell takes it over. Without it NewShell opens the path. Every
	// jail the shell starts binds this directory by descriptor, whatever
	// the path names by then: a path swapped for a link elsewhere after
	// the check never reaches a jail.
	Workspace *os.File
	// Session is the id of the session the shell serves: a runner
	// elsewhere than this host names what it makes after it (a
	// Kubernetes Sandbox). The local shell does not use it.
	Session string
}

// NewShell checks the profile and the workspace and returns a Shell that
// will start its jail on the first Exec. No process starts here.
func NewShell(p Profile, opts Options) (*Shell, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ws := opts.Workspace
	if ws == nil {
		f, err := os.Open(p.Workspace)
		if err != nil {
			if os.IsNotExist(err) {
				return nil, fmt.Errorf("workspace %s does not exist: create it or pass another directory", p.Workspace)
			}
			return nil, fmt.Errorf("workspace %s: %w", p.Workspace, err)
		}
		ws = f
	}
	fi, err := ws.Stat()
	if err != nil {
		ws.Close()
		return nil, fmt.Errorf("workspace %s: %w", p.Workspace, err)
	}
	if !fi.IsDir() {
		ws.Close()
		return nil, fmt.Errorf("workspace %s is a file, not a directory", p.Workspace)
	}
	if p.Egress != nil {
		p.Env = withEnv(p.Env, p.Egress.ProxyEnv())
	}
	path, err := FindBwrap(opts.Bwrap)
	if err != nil {
		ws.Close()
		return nil, err
	}
	runner, err := FindRunner(opts.Runner)
	if err != nil {
		ws.Close()
		return nil, err
	}
	s := &Shell{profile: p, bwrap: path, runner: runner, turn: make(chan struct{}, 1), after: opts.AfterCommand, ws: ws}
	s.turn <- struct{}{}
	s.owner = [2]int{os.Getuid(), os.Getgid()}
	if os.Geteuid() == 0 {
		// Root in the jail's user namespace is still host root to the
		// kernel for files it can reach: run the jail as an unprivileged uid.
		uid, gid := p.HostUID, p.HostGID
		if uid < 0 || gid < 0 {
			st := fi.Sys().(*syscall.Stat_t)
			uid, gid = int(st.Uid), int(st.Gid)
			if uid == 0 {
				uid, gid = 65534, 65534
			}
		}
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		s.owner = [2]int{uid, gid}
	}
	if opts.State != nil {
		s.state = cloneState(*opts.State)
	}
	if opts.NoCgroup {
		s.cgErr = fmt.Errorf("cgroups disabled by option")
	}
	return s, nil
}

// Owner returns the host uid and gid the jail runs as. Files created for
// the jail from outside (the file tools) should belong to them.
func (s *Shell) Owner() (uid, gid int) { return s.owner[0], s.owner[1] }

// State returns the saved working directory and exports.
func (s *Shell) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := cloneState(s.state)
	if st.Cwd == "" {
		st.Cwd = MountPoint
	}
	return st
}

// StateVersion counts the changes of State: while it is the same number,
// State is the same, and a caller that kept the last one need not copy
// and compare it again.
func (s *Shell) StateVersion() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateVersion
}

// Running reports whether the jail's process is alive.
func (s *Shell) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jail != nil && s.jail.alive()
}

// Busy reports whether a command is running.
func (s *Shell) Busy() bool { return len(s.turn) == 0 }

// CgroupError says why this shell's jail runs without a cgroup (nil when
// it has one, or before the first start).
func (s *Shell) CgroupError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cg != nil {
		return nil
	}
	return s.cgErr
}

// Close kills the jail and everything in it and removes its cgroup. A
// running command ends as interrupted. Close is idempotent.
func (s *Shell) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	j, cg, user := s.jail, s.cg, s.user
	s.jail, s.cg, s.user = nil, nil, nil
	s.mu.Unlock()
	if j != nil {
		j.kill()
	}
	if cg != nil {
		cg.remove()
	}
	if user != nil {
		user.leave()
	}
	if s.ws != nil {
		s.ws.Close()
	}
	return nil
}

// Stop kills the jail but keeps the Shell usable: the next Exec starts a
// fresh jail with the saved state. Used to stop idle shells.
func (s *Shell) Stop() {
	select {
	case <-s.turn:
	default:
		return // busy: not idle
	}
	defer func() { s.turn <- struct{}{} }()
	s.mu.Lock()
	j := s.jail
	s.jail = nil
	s.mu.Unlock()
	if j != nil {
		j.kill()
	}
}

// ensureJail returns the running jail, starting one with the saved state if
// there is none. Called with the turn held.
func (s *Shell) ensureJail() (*jail, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	s.restartForFileSize()
	if s.jail != nil && s.jail.alive() {
		return s.jail, nil
	}
	if s.jail != nil {
		s.jail.kill() // reap and close what is left
		s.jail = nil
	}
	if s.dial != nil {
		j, err := dialJail(s.dial)
		if err != nil {
			return nil, err
		}
		s.jail = j
		return j, nil
	}
	if s.user == nil && s.profile.User != "" {
		s.user = joinUser(s.profile.User, s.profile.UserLimits)
	}
	if s.cg == nil && s.cgErr == nil {
		s.cg, s.cgErr = newCgroupIn(s.user.cgroup(), s.profile.Limits)
		if s.cg != nil {
			oomKills.watch(s.cg)
		}
	}
	if s.cg != nil {
		s.cg.killAll() // leftovers of an earlier jail
	}
	// Once per Shell: granting walks the whole tree, and files created by
	// hand later get the jail's access through the default ACL (masked by
	// their mode: a 0644 file stays read-only until the server restarts).
	if !s.prepared {
		if err := prepareWorkspace(s.profile.Workspace, procPath(s.ws), s.cred); err != nil {
			return nil, err
		}
		if err := prepareHome(s.profile.Home, s.cred); err != nil {
			return nil, err
		}
		s.prepared = true
	}
	if err := s.user.begin(); err != nil {
		return nil, err
	}
	var ended sync.Once     // the jail exited, or never started
	uncount := s.user.abort // bound now: Close clears s.user
	end := func() { ended.Do(uncount) }
	ws, err := dupFile(s.ws)
	if err != nil {
		end()
		return nil, fmt.Errorf("start jail: workspace: %w", err)
	}
	defer ws.Close() // startJail closes it too once bwrap has it
	j, err := startJail(jailSpec{
		bwrap:     s.bwrap,
		profile:   s.profile,
		cred:      s.cred,
		cg:        s.cg,
		onExit:    end,
		workspace: ws,
		runner:    s.runner,
	})
	if err != nil {
		end()
		return nil, err
	}
	s.jail = j
	return j, nil
}

// initScript sets the shell up (the runner gives it its descriptors):
// limits that hold without a cgroup, the profile's environment, then the
// saved state.
func (s *Shell) initScript() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	// A write past RLIMIT_FSIZE fails with EFBIG instead of killing the
	// writer: a builtin (echo > f) would otherwise kill the shell.
	b.WriteString("trap '' XFSZ\n")
	l := s.profile.Limits
	if n, ok := s.fileSizeCap(); ok {
		blocks := (n + 511) / 512 // dash counts 512-byte blocks
		b.WriteString("ulimit -f " + strconv.FormatInt(blocks, 10) + " 2>/dev/null\n")
	}
	if l.OpenFiles > 0 {
		b.WriteString("ulimit -n " + strconv.FormatUint(l.OpenFiles, 10) + " 2>/dev/null\n")
	}
	b.WriteString("umask 022\n")
	b.WriteString(envScript(s.profile.Env))
	b.WriteString(restoreScript(s.state))
	return b.String()
}

// processLimit is the shell's RLIMIT_NPROC, which the runner sets before
// the shell runs anything (dash's ulimit has no -u). It counts every
// process of the jail's uid, so it means nothing (and is skipped) when the
// jail runs as root.
func (s *Shell) processLimit() uint64 {
	if s.owner[0] == 0 {
		return 0
	}
	return s.profile.Limits.Processes
}

func cloneState(st State) State {
	env := make(map[string]string, len(st.Env))
	for k, v := range st.Env {
		env[k] = v
	}
	return State{Cwd: st.Cwd, Env: env}
}

// validateCommand rejects what no shell can run.
func validateCommand(command string) error {
	if strings.IndexByte(command, 0) >= 0 {
		return ErrNULInCommand
	}
	if strings.TrimSpace(command) == "" {
		return ErrEmptyCommand
	}
	return nil
}

// acquire waits for the shell's turn, or fails at once with NoWait.
func (s *Shell) acquire(ctx context.Context, noWait bool) error {
	if noWait {
		select {
		case <-s.turn:
			return nil
		default:
			return ErrBusy
		}
	}
	select {
	case <-s.turn:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Shell) release() { s.turn <- struct{}{} }

// abandon kills j, which failed to start its shell, forgets it if it is
// still the shell's jail (the next command starts a fresh one with the
// saved state), and gives the turn back.
func (s *Shell) abandon(j *jail) {
	s.mu.Lock()
	if s.jail == j {
		s.jail = nil
	}
	s.mu.Unlock()
	j.kill()
	s.release()
}

// quiet is how long a timed-out or interrupted command gets to end after its
// processes were signalled, before the whole jail is killed.
const quiet = 500 * time.Millisecond

// now is the clock; tests may replace it.
var now = time.Now

// procPath names an open file itself, whatever its path now.
func procPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// dupFile returns a second descriptor of f, to hand to a child.
func dupFile(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}
