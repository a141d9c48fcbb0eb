package runnertest

import (
	"encoding/json"
	"net"
	"strings"

	"github.com/warrenhq/warren/sandbox/runner"
	"github.com/warrenhq/warren/sandbox/runner/client"
	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// Serve serves the runner's operations (sandbox/runner.Ops) in this
// process over a pipe, with the jail's paths mapped to directories of this
// host (roots: "/workspace" → a directory, "/home/warren" → another): how
// a fake runner, which has no jail, offers the tree walk and disk usage
// that snapshots, diffs and the quota ask a runner for. The caller closes
// the connection.
func Serve(roots map[string]string) *client.Conn {
	ops := runner.Ops()
	tree, du := ops[proto.OpTree], ops[proto.OpDiskUsage]
	ops[proto.OpTree] = func(c *runner.Call) (any, error) {
		var a proto.TreeArgs
		if err := c.DecodeArgs(&a); err != nil {
			return nil, err
		}
		a.Root = mapPath(roots, a.Root)
		return tree(withArgs(c, a))
	}
	ops[proto.OpDiskUsage] = func(c *runner.Call) (any, error) {
		var a proto.DiskUsageArgs
		if err := c.DecodeArgs(&a); err != nil {
			return nil, err
		}
		for i, d := range a.Dirs {
			a.Dirs[i] = mapPath(roots, d)
		}
		return du(withArgs(c, a))
	}
	a, b := net.Pipe()
	go func() { _ = runner.NewServer(ops).Serve(b); b.Close() }()
	return client.New(a)
}

func withArgs(c *runner.Call, args any) *runner.Call {
	raw, _ := json.Marshal(args)
	return &runner.Call{Ctx: c.Ctx, Args: raw, In: c.In, Out: c.Out}
}

// mapPath maps a jail path beneath one of roots to the host directory;
// any other path is refused by pointing it nowhere.
func mapPath(roots map[string]string, p string) string {
	for jail, host := range roots {
		if p == jail {
			return host
		}
		if rest, ok := strings.CutPrefix(p, jail+"/"); ok {
			return host + "/" + rest
		}
	}
	return "/nonexistent-outside-the-fake-jail"
}
