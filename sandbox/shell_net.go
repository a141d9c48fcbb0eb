package sandbox

import (
	"context"
	"fmt"

	"github.com/warrenhq/warren/sandbox/runner/client"
)

// Dialer connects to a session's runner on the network (a pod's
// `warren-runner --listen`, reached with client.DialTLS and the session's
// certificates). Each call is a fresh connection, and a fresh connection
// is a fresh shell: the runner kills a connection's shell when it ends.
type Dialer func(ctx context.Context) (*client.Conn, error)

// NewNetShell returns a Shell whose commands run in the shell of a runner
// reached through dial instead of a bwrap jail on this host: the same
// shell.exec protocol, the same checks of what the runner says (capped
// output, bounded cwd and exports, a runner that breaks the protocol or
// stops answering is hung up on), the same queue, timeouts, interrupts,
// state and restarts. Where the local jail starts bwrap, this one dials;
// where it kills the jail, this one hangs up, which makes the runner kill
// the shell and everything its commands left running. Nothing is dialled
// until the first Exec or Runner.
//
// The profile gives the shell its environment and the limits its runner
// can set (file size, open files, processes); mounts, cgroups, seccomp and
// the network are the pod's, not the profile's. opts.State and
// opts.AfterCommand work as for NewShell; a Workspace is closed unused.
func NewNetShell(p Profile, dial Dialer, opts Options) (*Shell, error) {
	if opts.Workspace != nil {
		opts.Workspace.Close()
	}
	if dial == nil {
		return nil, fmt.Errorf("a shell on the network needs a dialer")
	}
	s := &Shell{profile: p, dial: dial, turn: make(chan struct{}, 1), after: opts.AfterCommand,
		owner: [2]int{-1, -1}, prepared: true, cgErr: fmt.Errorf("the runner is on the network: its pod bounds it")}
	s.turn <- struct{}{}
	if opts.State != nil {
		s.state = cloneState(*opts.State)
	}
	return s, nil
}

// dialJail connects to the runner through dial: the "jail" of a shell on
// the network is its connection, which ends when either side hangs up.
func dialJail(dial Dialer) (*jail, error) {
	ctx, cancel := context.WithTimeout(context.Background(), helloWait)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("reach the session's runner: %w", err)
	}
	j := &jail{runner: c, exited: make(chan struct{}), exitCode: -1, remote: true}
	go func() {
		<-c.Done()
		close(j.exited)
	}()
	return j, nil
}
