package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// testUser returns a user name no other test uses.
func testUser(t *testing.T, prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// userShells starts n shells of one user with the given per-user limits.
func userShells(t *testing.T, user string, l UserLimits, n int) []*Shell {
	t.Helper()
	out := make([]*Shell, n)
	for i := range out {
		out[i], _ = newTestShell(t, func(p *Profile) { p.User, p.UserLimits = user, l })
	}
	return out
}

// hold is a command that takes mb MiB of memory (touched, so it counts)
// and keeps it in a background job; it prints "held" once it has it.
func hold(mb int) string {
	return `python3 -c "import sys,time; b = b'x' * (` + strconv.Itoa(mb) + ` << 20); print('held', flush=True); time.sleep(120)" > /tmp/hold 2>&1 & ` +
		`export HOLDER=$!; while ! grep -q held /tmp/hold && kill -0 $HOLDER 2>/dev/null; do sleep 0.05; done; cat /tmp/hold`
}

// TestUserMemoryIsCappedAcrossSessions is issue 9 item 11: one user's
// three sessions, each well within its own jail's memory limit, cannot
// together hold more than the user's cap; another user is unaffected.
func TestUserMemoryIsCappedAcrossSessions(t *testing.T) {
	alice := userShells(t, testUser(t, "alice"), UserLimits{MemoryBytes: 256 << 20, Jails: 8}, 3)
	requireCgroups(t, alice[0])
	bob := userShells(t, testUser(t, "bob"), UserLimits{MemoryBytes: 256 << 20, Jails: 8}, 1)[0]

	for _, sh := range alice {
		mustRun(t, sh, hold(110)) // 330 MiB together, over 256
	}
	alive := 0
	for _, sh := range alice {
		if res := mustRun(t, sh, "kill -0 $HOLDER && echo alive"); strings.Contains(string(res.Stdout), "alive") {
			alive++
		}
	}
	if alive > 2 {
		t.Errorf("all three of alice's 110 MiB jobs survive under a 256 MiB cap for the user")
	}
	if alive == 0 {
		t.Errorf("none of alice's jobs survives: the cap should kill one, not all")
	}
	// Bob holds as much as alice may in total, at the same time.
	if res := mustRun(t, bob, hold(200)+"; kill -0 $HOLDER && echo alive"); !strings.Contains(string(res.Stdout), "alive") {
		t.Errorf("bob's 200 MiB job died: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	// Each shell of alice's survives the kill, with its state.
	for _, sh := range alice {
		expectOut(t, sh, "echo ok", 0, "ok")
	}
}

// TestUserJailCapRefusesOneMore: at the cap, one more jail of the same
// user fails to start and says which limit, the count and what to do;
// another user starts as usual, and stopping one of the first user's
// shells makes room.
func TestUserJailCapRefusesOneMore(t *testing.T) {
	user := testUser(t, "carol")
	shells := userShells(t, user, UserLimits{Jails: 2}, 3)
	mustRun(t, shells[0], "true")
	mustRun(t, shells[1], "true")
	_, err := shells[2].Exec(context.Background(), "echo third", ExecOptions{})
	var capErr *UserJailsError
	if !errors.As(err, &capErr) || capErr.Running != 2 || capErr.Max != 2 ||
		!strings.Contains(err.Error(), "2 jails running") || !strings.Contains(err.Error(), "stop one") {
		t.Fatalf("third jail of a user capped at 2: %v, want a UserJailsError saying 2 jails run and how to stop one", err)
	}
	if shells[2].Running() {
		t.Error("the refused jail runs")
	}
	if n := RunningJails(user); n != 2 {
		t.Errorf("RunningJails = %d, want 2", n)
	}
	other := userShells(t, testUser(t, "dave"), UserLimits{Jails: 2}, 1)[0]
	expectOut(t, other, "echo dave", 0, "dave")

	shells[0].Stop()
	expectOut(t, shells[2], "echo third", 0, "third")
	if n := RunningJails(user); n != 2 {
		t.Errorf("RunningJails after a stop and a start = %d, want 2", n)
	}
}

// TestUserCgroupHoldsTheJailsAndGoesWithThem: a user's jails nest in one
// cgroup that carries the user's limits; it is removed with the user's
// last shell, and swept when its server died.
func TestUserCgroupHoldsTheJailsAndGoesWithThem(t *testing.T) {
	user := testUser(t, "erin")
	shells := userShells(t, user, UserLimits{MemoryBytes: 512 << 20, CPUs: 2, PIDs: 300, Jails: 4}, 2)
	requireCgroups(t, shells[0])
	var wg sync.WaitGroup
	for _, sh := range shells {
		wg.Go(func() { mustRun(t, sh, "true") })
	}
	wg.Wait()
	parent := filepath.Dir(shells[0].cg.dirs[0])
	if !strings.Contains(filepath.Base(parent), "-user-"+user+"-") {
		t.Fatalf("the jail's cgroup %s is not in a cgroup of user %s", shells[0].cg.dirs[0], user)
	}
	for i, sh := range shells {
		for j, dir := range sh.cg.dirs {
			if filepath.Dir(dir) != shells[0].user.cg.dirs[j] {
				t.Errorf("shell %d's cgroup %s is not in its user's", i, dir)
			}
		}
	}
	want := map[string]string{"pids.max": "300", "memory.max": "536870912", "cpu.max": "200000 100000",
		"memory.limit_in_bytes": "536870912", "cpu.cfs_quota_us": "200000"}
	for _, dir := range shells[0].user.cg.dirs {
		for file, value := range want {
			if b, err := os.ReadFile(filepath.Join(dir, file)); err == nil && strings.TrimSpace(string(b)) != value {
				t.Errorf("%s/%s = %s, want %s", dir, file, b, value)
			}
		}
	}
	userDirs := shells[0].user.cg.dirs
	shells[0].Close()
	for _, dir := range userDirs {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("the user's cgroup %s went with one of two shells", dir)
		}
	}
	shells[1].Close()
	for _, dir := range userDirs {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("the user's cgroup %s survived the user's last shell", dir)
		}
	}
}

// TestStaleUserCgroupsAreSwept: a dead server's user cgroups go, with the
// jail cgroups nested in them.
func TestStaleUserCgroupsAreSwept(t *testing.T) {
	own, err := ownCgroups()
	if err != nil || CgroupMode() != "v1" {
		t.Skip("the sweep is exercised on cgroup v1 hosts like CI's")
	}
	parent := ownDirV1(own, "pids")
	stale := filepath.Join(parent, "warren-99999999-user-frank-0badcafe")
	if err := os.MkdirAll(filepath.Join(stale, "warren-99999999-7"), 0o755); err != nil {
		t.Skipf("cannot create cgroups here: %v", err)
	}
	sweepStale(own)
	if _, err := os.Stat(stale); err == nil {
		removeCgroupDir(stale)
		t.Fatal("the user cgroup of a dead server survived the sweep")
	}
}
