package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Per-user limits: the jails of one user (Profile.User) share a parent
// cgroup that caps their memory, CPU and processes together, and this
// server counts how many of them run. Without it, a user with many
// sessions holds many times one jail's limits.

// UserJailsError is returned by Exec when starting a jail would exceed the
// user's cap on running jails.
type UserJailsError struct {
	User    string
	Running int // jails of the user running now
	Max     int // UserLimits.Jails
}

func (e *UserJailsError) Error() string {
	return fmt.Sprintf("user %s already has %d jails running, the most one user may run at once (%d): "+
		"stop one of the user's sessions, or wait for an idle one to stop, and retry", e.User, e.Running, e.Max)
}

// userGroup is what the shells of one user share.
type userGroup struct {
	name   string
	limits UserLimits
	cg     *cgroup // nil when this host gives the server no cgroups
	cgErr  error
	shells int // shells holding the group: it is removed with the last
	jails  int // jails running now
}

// users maps a user name to the group of its shells. mu also guards every
// userGroup's counters.
var users = struct {
	mu sync.Mutex
	m  map[string]*userGroup
}{m: map[string]*userGroup{}}

// joinUser returns name's group with one more shell holding it, creating
// the group and its cgroup for the user's first shell. The limits are
// those of the first shell; a server gives all shells of a user the same.
func joinUser(name string, limits UserLimits) *userGroup {
	users.mu.Lock()
	defer users.mu.Unlock()
	g := users.m[name]
	if g == nil {
		g = &userGroup{name: name, limits: limits}
		g.cg, g.cgErr = newUserCgroup(name, limits)
		users.m[name] = g
	}
	g.shells++
	return g
}

// leave drops one shell's hold; the last one removes the user's cgroup
// (its jails' cgroups, nested in it, are gone by then).
func (g *userGroup) leave() {
	users.mu.Lock()
	defer users.mu.Unlock()
	g.shells--
	if g.shells > 0 {
		return
	}
	if users.m[g.name] == g {
		delete(users.m, g.name)
	}
	if g.cg != nil {
		g.cg.remove()
	}
}

// startJail counts a jail about to start, or refuses it at the cap.
func (g *userGroup) startJail() error {
	users.mu.Lock()
	defer users.mu.Unlock()
	if max := g.limits.Jails; max > 0 && g.jails >= max {
		return &UserJailsError{User: g.name, Running: g.jails, Max: max}
	}
	g.jails++
	return nil
}

// jailEnded uncounts a jail that has exited (or failed to start).
func (g *userGroup) jailEnded() {
	users.mu.Lock()
	g.jails--
	users.mu.Unlock()
}

// RunningJails returns how many jails of user run in this server now.
func RunningJails(user string) int {
	users.mu.Lock()
	defer users.mu.Unlock()
	if g := users.m[user]; g != nil {
		return g.jails
	}
	return 0
}

// newUserCgroup creates the parent cgroup of a user's jails.
func newUserCgroup(user string, l UserLimits) (*cgroup, error) {
	cg, err := createCgroup(nil, userCgroupName(user), cgroupSettings(Limits{PIDs: l.PIDs, MemoryBytes: l.MemoryBytes, CPUs: l.CPUs}, CgroupMode() == "v2"))
	if err != nil {
		return nil, fmt.Errorf("cgroup of user %s: %w", user, err)
	}
	if cg.v2 {
		// v2 hands a controller to children only when the parent enables
		// it; the user's cgroup holds no process itself, so it may. One at
		// a time: a controller the host lacks fails alone, and a jail
		// limit that needs it says so when it is set.
		for _, ctrl := range v1Controllers {
			_ = os.WriteFile(filepath.Join(cg.dirs[0], "cgroup.subtree_control"), []byte("+"+ctrl), 0)
		}
	}
	return cg, nil
}

// userCgroupName is warren-<pid>-user-<name>-<hash>: the server's pid, so
// that a dead server's are swept; the user's name, cut to what a directory
// name may hold, for people reading the tree; a hash of the whole name, so
// that two names never share a cgroup.
func userCgroupName(user string) string {
	sum := sha256.Sum256([]byte(user))
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, user)
	if len(clean) > 32 {
		clean = clean[:32]
	}
	return fmt.Sprintf("warren-%d-user-%s-%s", os.Getpid(), clean, hex.EncodeToString(sum[:4]))
}

// The methods below accept a nil group: a shell without Profile.User.

// cgroup returns the user's cgroup, nil without one.
func (g *userGroup) cgroup() *cgroup {
	if g == nil {
		return nil
	}
	return g.cg
}

// begin counts a jail about to start (see startJail); nil-safe.
func (g *userGroup) begin() error {
	if g == nil {
		return nil
	}
	return g.startJail()
}

// abort uncounts a jail that has exited or failed to start; nil-safe.
func (g *userGroup) abort() {
	if g != nil {
		g.jailEnded()
	}
}
