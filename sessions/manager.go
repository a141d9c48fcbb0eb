package sessions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions/workspace"
)

// Config tunes a Manager. Zero caps mean "no cap".
type Config struct {
	// NewRunner makes each session's runner (see Runner); nil runs
	// sessions in local bwrap jails (LocalRunner).
	NewRunner NewRunner
	// DataDir holds workspaces/<id> and audit/<id>.git.
	DataDir string
	// BindDir, when set, is the directory every user's default session is
	// bound to (serve stdio --workspace DIR). Empty: default sessions get
	// an empty workspace of their own.
	BindDir string
	// Profile builds the jail profile of a workspace; nil means
	// sandbox.DefaultProfile.
	Profile func(workspace string) sandbox.Profile
	// AllowLocalSources lets Create clone or bind paths of the server's
	// host (and file:// URLs). Off for remote users: a path is a window
	// onto the host's files, and a bound directory's owner is who the jail
	// runs as when the server is root.
	AllowLocalSources bool
	// RemoteCallers says callers reach the server over HTTP with tokens:
	// they are not the host's operator. Their clones reach https on public
	// addresses only, never with the server's ssh keys; with
	// AllowLocalSources on a server running as root, the local directories
	// they name must not belong to root.
	RemoteCallers bool
	// IdleTimeout stops a shell unused for this long (0: never); the next
	// command restarts it with its saved cwd and exports.
	IdleTimeout time.Duration
	// MaxSessionsPerUser caps the sessions a user has that are not deleted.
	MaxSessionsPerUser int
	// MaxRunningShells caps jails running at once on this server; the
	// least recently used idle ones are stopped to make room.
	MaxRunningShells int
	// UserLimits bound the running jails of each user together (memory,
	// CPU and processes through a parent cgroup per user, and how many
	// run at once), so that many sessions are not many times one jail.
	UserLimits sandbox.UserLimits
	// QuotaBytes caps the disk use of each session's workspace and home
	// together (a bound directory is the user's own and is not counted).
	// It is enforced while commands run: see quota.go.
	QuotaBytes int64
	// QuotaInterval is how long a measurement taken while nothing ran is
	// trusted, against changes made on the host; default 30s.
	QuotaInterval time.Duration
	// QuotaPoll is how often disk use is measured while a session's jail
	// has processes; default 250ms.
	QuotaPoll time.Duration
	// AuditExclude lists paths (gitignore syntax, relative to the
	// workspace) that snapshots and diffs leave out. Only the operator
	// decides this: nothing in a workspace (.gitignore, .git/info/exclude)
	// hides anything from the audit.
	AuditExclude []string
	// OnEnd runs after a session is archived or deleted, e.g. to release
	// its task claims. Errors are the hook's to log.
	OnEnd func(ctx context.Context, sessionID string)
	// Network is the network policy: modes allowed, default, the proxy.
	Network NetworkConfig
	// Lease, when set, makes this manager one replica of several on one
	// database: it drives a session's jail only while it holds the
	// session's lease (lease.go). Nil: the only server (SQLite).
	Lease *LeaseConfig
	// LeaseLog, when set, hears of this replica's lease changes.
	LeaseLog func(msg, sessionID string, epoch int64)
	// RemoveRunner, when set, removes what a deleted session's runner
	// keeps away from this host (its Kubernetes Sandbox and certificate).
	// Delete and PurgeDeleted call it with the session's files; when it
	// fails, the session stays in state deleted and the next server start
	// tries again.
	RemoveRunner func(ctx context.Context, sessionID string) error
	// PrepareRunner, when set, is called as a session is created, after
	// its workspace is made: a runner away from this host makes its place
	// there (a Kubernetes Sandbox), so that its pod starts while the
	// client gets its answer. A failure fails the create.
	PrepareRunner func(ctx context.Context, sessionID string) error
	// NoBind refuses bind mode (and BindDir): set when the runners'
	// workspaces are away from this host, where no directory of it can be
	// worked in place.
	NoBind bool
}

// Manager maps (user, session id) to sessions and their live shells. Shells
// are created lazily on first use and start no process until their first
// command.
type Manager struct {
	store *Store
	cfg   Config
	now   func() time.Time
	// dataReal is cfg.DataDir with its links resolved: what sources are
	// compared with.
	dataReal string

	// mu protects the maps below. It is never held across database or
	// disk I/O: every call of every user takes it.
	mu   sync.Mutex
	live map[string]*live
	// known caches sessions already read, so that a tool call does not pay
	// a database round trip; defaults maps owner and binding to an id.
	known    map[string]*Session
	defaults map[string]string
	creating map[string]int // sessions being created, per owner
	onDelete OnDeleteFunc   // purge.go

	ops sync.Map // session id → *sync.Mutex serialising its lifecycle and audit
	// makingDefault: owner and binding → *sync.Mutex serialising the
	// creation of that default session.
	makingDefault sync.Map
	quota         quotas
	fsHandles     fsHandles // the file systems quotas count (measure.go)

	saver      *saver // writes shell states, retrying
	jobs       *jobs  // every session's command line (jobs.go)
	usageCheck UsageCheck
	stopReaper context.CancelFunc
	leases     *leaser // nil without Config.Lease
}

// live is a session's shell object and when it was last handed out.
type live struct {
	sh       Runner
	lastUsed time.Time
}

// NewManager returns a Manager over store.
func NewManager(store *Store, cfg Config) (*Manager, error) {
	dataReal, err := resolveDataDir(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	if cfg.BindDir != "" && cfg.NoBind {
		return nil, fmt.Errorf("--workspace binds a directory of this host, and this server's sessions run away from it (Kubernetes): leave it out")
	}
	if cfg.BindDir != "" {
		abs, err := filepath.Abs(cfg.BindDir)
		if err != nil {
			return nil, fmt.Errorf("workspace %s: %w", cfg.BindDir, err)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("workspace %s: %w", cfg.BindDir, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("workspace %s is not a directory", cfg.BindDir)
		}
		// The operator's directory is held to the rules of every bind.
		real, err := workspace.CheckDir(abs, workspace.Policy{Local: true, DataDir: dataReal})
		if err != nil {
			return nil, fmt.Errorf("--workspace: %w", err)
		}
		cfg.BindDir = real
	}
	if cfg.Profile == nil {
		cfg.Profile = sandbox.DefaultProfile
	}
	if cfg.QuotaInterval == 0 {
		cfg.QuotaInterval = 30 * time.Second
	}
	if cfg.QuotaPoll <= 0 {
		cfg.QuotaPoll = defaultQuotaPoll
	}
	m := &Manager{store: store, cfg: cfg, dataReal: dataReal, now: time.Now, live: map[string]*live{},
		known: map[string]*Session{}, defaults: map[string]string{}, creating: map[string]int{},
		quota: quotas{m: map[string]*usage{}}, saver: newSaver(store)}
	// A command's end queues its state even when nobody collects its result.
	m.jobs = newJobs(func(j *Job) { m.queueState(j.session, j.runner) })
	if cfg.Lease != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = checkSharedDataDir(ctx, store.db, cfg.DataDir)
		cancel()
		if err != nil {
			m.saver.close(context.Background())
			return nil, err
		}
		if m.leases, err = newLeaser(m, store.db, *cfg.Lease); err != nil {
			m.saver.close(context.Background())
			return nil, err
		}
	}
	return m, nil
}

// Store returns the manager's store.
func (m *Manager) Store() *Store { return m.store }

// recheck is how long a cached session's state is trusted before it is
// re-read: the CLI may change it in the same database behind our back.
const recheck = time.Second

// Get returns user's session id in whatever state it is; an empty id means
// the user's default session, created on first use. Another user's session
// is ErrNotFound.
func (m *Manager) Get(ctx context.Context, user, id string) (*Session, error) {
	if id == "" {
		return m.defaultSession(ctx, user)
	}
	m.mu.Lock()
	s := m.known[id]
	m.mu.Unlock()
	if s != nil {
		if s.Owner != user {
			return nil, ErrNotFound
		}
		return s, m.refresh(ctx, s)
	}
	s, err := m.store.Get(ctx, user, id)
	if err != nil {
		return nil, err
	}
	return m.remember(s), nil
}

// refresh re-reads s's state when the cached one is older than recheck.
func (m *Manager) refresh(ctx context.Context, s *Session) error {
	s.mu.Lock()
	fresh := m.now().Sub(s.checked) < recheck
	s.mu.Unlock()
	if fresh {
		return nil
	}
	if s.State() == StateDeleted {
		return nil // for good, and its row is gone
	}
	st, err := m.store.state(ctx, s.ID)
	if errors.Is(err, ErrNotFound) {
		st, err = StateDeleted, nil // deleted by another process, rows and all
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	changed := s.state != st
	s.state, s.checked = st, m.now()
	s.mu.Unlock()
	if changed && st != StateActive {
		m.dropShell(s.ID, st != StatePaused)
	}
	return nil
}

// remember caches s, or returns the copy already cached.
func (m *Manager) remember(s *Session) *Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.known[s.ID]; old != nil {
		return old
	}
	s.checked = m.now()
	m.known[s.ID] = s
	return s
}

// Shell returns the live shell of session s, creating it (without starting
// a process) with the session's saved state. An archived session's shell
// binds its workspace read-only, but Open refuses to run it at all.
func (m *Manager) Shell(s *Session) (Runner, error) {
	// Among replicas, only the lease's holder drives the jail (lease.go).
	if err := m.leases.hold(context.Background(), s); err != nil {
		return nil, err
	}
	if sh := m.liveShell(s.ID); sh != nil {
		return sh, nil
	}
	// The runner gets the directory checked here, and its jails bind that
	// one by descriptor, whatever the path names when they start. Opened
	// outside the manager's lock: a slow file system must not stall the
	// other sessions.
	d, err := m.openWorkspace(s)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.live[s.ID]; ok { // made by another call meanwhile
		l.lastUsed = m.now()
		return l.sh, nil
	}
	state := sandbox.State(s.shellState())
	p := m.cfg.Profile(s.Workspace)
	p.ReadOnlyWorkspace = s.State() == StateArchived
	p.User, p.UserLimits = s.Owner, m.cfg.UserLimits
	if m.cfg.DataDir != "" {
		p.Home = m.homeDir(s.ID) // caches and dotfiles stay out of the workspace
	}
	if err := m.networkProfile(s, &p); err != nil {
		return nil, err
	}
	opts := sandbox.Options{State: &state, Session: s.ID}
	var sh Runner
	if q := m.cfg.QuotaBytes; q > 0 {
		// No file may outgrow the quota: the kernel stops it there.
		if s.Mode != ModeBind && (p.Limits.FileSizeBytes <= 0 || p.Limits.FileSizeBytes > q) {
			p.Limits.FileSizeBytes = q
		}
		opts.AfterCommand = func() string { return m.afterCommand(s, sh) }
	}
	opts.Workspace, err = d.File(s.Workspace)
	if err != nil {
		return nil, fmt.Errorf("start shell of session %s: %w", s.ID, err)
	}
	newRunner := m.cfg.NewRunner
	if newRunner == nil {
		newRunner = LocalRunner
	}
	sh, err = newRunner(p, opts)
	if err != nil {
		return nil, fmt.Errorf("start shell of session %s: %w", s.ID, err)
	}
	m.live[s.ID] = &live{sh: sh, lastUsed: m.now()}
	return sh, nil
}

// liveShell returns session id's live shell, marked used now, or nil.
func (m *Manager) liveShell(id string) Runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.live[id]; ok {
		l.lastUsed = m.now()
		return l.sh
	}
	return nil
}

// open returns user's session and its runner for a command: the session
// must be active, and room is made under the running-shells cap. Exec is
// its only caller: a command runs through the manager, never on a runner
// handed out.
// Over its disk quota the command still runs, but cannot grow the usage
// (see quota.go): that is what lets rm free space.
func (m *Manager) open(ctx context.Context, user, id string) (*Session, Runner, error) {
	ctx, span := tracer.Start(ctx, "sessions.open")
	defer span.End()
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return nil, nil, err
	}
	if st := s.State(); st != StateActive {
		return nil, nil, &StateError{ID: s.ID, State: st, Action: "run"}
	}
	if err := m.guard(s); err != nil {
		return nil, nil, err
	}
	sh, err := m.Shell(s)
	if err != nil {
		return nil, nil, err
	}
	if max := m.cfg.UserLimits.Jails; max > 0 && !sh.Running() && sandbox.RunningJails(user) >= max {
		return nil, nil, limitf("you already run %d shells, the limit per user is %d: pause a session you "+
			"are not using (session_control with action pause, or 'warren session pause ID'), or wait for "+
			"an idle one to stop, then retry", sandbox.RunningJails(user), max)
	}
	if err := m.makeRoom(s.ID); err != nil {
		return nil, nil, err
	}
	if err := m.startCommand(s, sh); err != nil {
		return nil, nil, err
	}
	return s, sh, nil
}

// openCommand is open. The command is not looked at: no word in it could
// be trusted (an exported PATH makes "rm" anything), so every command gets
// the same rules.
func (m *Manager) openCommand(ctx context.Context, user, id, command string) (*Session, Runner, error) {
	return m.open(ctx, user, id)
}

// OpenFiles returns user's session and its files for the file tools,
// done by the session's runner inside its jail, which starts when it is
// not running (a paused session's too; an archived session's binds the
// workspace read-only). Reads work in every state but deleted; writes need
// an active session within its quota, and each write is checked against
// the quota before it is made.
func (m *Manager) OpenFiles(ctx context.Context, user, id string, write bool) (*Session, Files, error) {
	ctx, span := tracer.Start(ctx, "sessions.open")
	defer span.End()
	s, err := m.Get(ctx, user, id)
	if err != nil {
		return nil, nil, err
	}
	st := s.State()
	switch {
	case st == StateDeleted:
		return nil, nil, &StateError{ID: s.ID, State: st, Action: "read files"}
	case write && st != StateActive:
		return nil, nil, &StateError{ID: s.ID, State: st, Action: "write"}
	case write:
		if err := m.checkQuota(s, "write files"); err != nil {
			return nil, nil, err
		}
	}
	// The jail binds the directory checked here, by descriptor; a path
	// that no longer passes is refused, as for a command.
	if err := m.guard(s); err != nil {
		return nil, nil, err
	}
	sh, err := m.Shell(s)
	if err != nil {
		return nil, nil, err
	}
	if !sh.Running() {
		if err := m.makeRoom(s.ID); err != nil {
			return nil, nil, err
		}
	}
	f, err := sh.Files(ctx)
	if err != nil {
		return nil, nil, err
	}
	return s, &sessionFiles{Files: f, m: m, s: s, write: write}, nil
}

// saveState records the shell's cwd and exports so that they survive a
// restart of the server, and waits until they are in the database or ctx
// ends: then it returns a NotSavedError (errors.Is ErrStateNotSaved) and
// the state is written later, retried until the database takes it.
// Unchanged state is not written again: most commands change neither, and
// a write per command would cost more than the command.
func (m *Manager) saveState(ctx context.Context, s *Session, sh Runner) error {
	m.queueState(s, sh)
	if m.saver.written(s.ID) {
		return nil // most commands change neither cwd nor exports: nothing to wait for, nor to trace
	}
	ctx, span := tracer.Start(ctx, "sessions.save_state")
	defer span.End()
	return m.saver.wait(ctx, s.ID)
}

// queueState hands the shell's state to the saver when it changed.
func (m *Manager) queueState(s *Session, sh Runner) {
	m.mu.Lock()
	l := m.live[s.ID]
	if l != nil {
		l.lastUsed = m.now() // a long command ends now: idle from here
	}
	m.mu.Unlock()
	v := sh.StateVersion()
	s.mu.Lock()
	if l != nil && l.sh == sh && s.shellFrom.live == l && s.shellFrom.version == v {
		s.mu.Unlock()
		return // nothing changed since the last look
	}
	s.mu.Unlock()
	st := sh.State()
	s.mu.Lock()
	same := sameState(s.Shell, st)
	s.Shell = st
	s.shellFrom.live, s.shellFrom.version = l, v
	s.mu.Unlock()
	if !same {
		m.saver.queueFenced(s.ID, st, m.leases.fence(s.ID))
	}
}

func sameState(a, b ShellState) bool {
	if a.Cwd != b.Cwd || len(a.Env) != len(b.Env) {
		return false
	}
	for k, v := range a.Env {
		if w, ok := b.Env[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// List returns user's sessions without starting anything; deleted ones
// (whose rows could not be removed yet) only with withDeleted.
func (m *Manager) List(ctx context.Context, user string, withDeleted bool) ([]Info, error) {
	list, err := m.store.List(ctx, user, withDeleted)
	if err != nil {
		return nil, err
	}
	out := make([]Info, len(list))
	for i, s := range list {
		m.mu.Lock()
		cached := m.known[s.ID]
		m.mu.Unlock()
		if cached != nil {
			// The cache holds the newest shell state (saved or not).
			s.mu.Lock()
			st := s.state
			s.mu.Unlock()
			cached.mu.Lock()
			cached.state, cached.checked = st, m.now()
			cached.mu.Unlock()
			s = cached
		}
		out[i] = s.Info()
	}
	return out, nil
}

// Running reports whether session id's jail is running now.
func (m *Manager) Running(id string) bool {
	m.mu.Lock()
	l := m.live[id]
	m.mu.Unlock()
	return l != nil && l.sh.Running()
}

// dropShell stops session id's jail; with forget it also closes the shell
// object, so that the next one is built from the session's new state.
func (m *Manager) dropShell(id string, forget bool) {
	m.mu.Lock()
	l := m.live[id]
	if forget {
		delete(m.live, id)
	}
	m.mu.Unlock()
	if l == nil {
		return
	}
	if forget {
		// Stopped first: a runner away from this host suspends what it
		// runs on (a Kubernetes Sandbox), which closing alone keeps for
		// the server's next start.
		l.sh.Stop()
		l.sh.Close()
		if st := m.sessionState(id); st == StateArchived || st == StateDeleted {
			m.forgetNetwork(id)
		}
	} else {
		l.sh.Stop()
	}
}

// Close saves every live shell's state, kills its jail, and writes what
// the saver still holds, until ctx ends.
func (m *Manager) Close(ctx context.Context) error {
	if m.stopReaper != nil {
		m.stopReaper()
	}
	m.jobs.stopAll() // their final cwd and exports are queued below
	m.mu.Lock()
	lives := m.live
	m.live = map[string]*live{}
	known := make(map[string]*Session, len(lives))
	for id := range lives {
		known[id] = m.known[id]
	}
	m.mu.Unlock()
	defer m.fsHandles.close()
	for id, l := range lives {
		if s := known[id]; s != nil {
			m.queueState(s, l.sh)
		} else {
			m.saver.queueFenced(id, l.sh.State(), m.leases.fence(id))
		}
		l.sh.Close()
	}
	err := m.saver.close(ctx)
	m.leases.close() // after the states are written under them
	return err
}

// sessionState returns the cached state of session id ("" if unknown).
func (m *Manager) sessionState(id string) State {
	m.mu.Lock()
	s := m.known[id]
	m.mu.Unlock()
	if s == nil {
		return ""
	}
	return s.State()
}

// SetOnEnd sets Config.OnEnd after construction: serve builds the task
// board, whose claims the hook releases, after the manager.
func (m *Manager) SetOnEnd(fn func(ctx context.Context, sessionID string)) {
	m.mu.Lock()
	m.cfg.OnEnd = fn
	m.mu.Unlock()
}
