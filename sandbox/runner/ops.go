package runner

import (
	"os"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// Ops returns every operation this runner serves, by name.
func Ops() map[string]Handler {
	ops := map[string]Handler{
		proto.OpPing: ping,
	}
	for name, h := range extraOps {
		ops[name] = h
	}
	return ops
}

// extraOps are operations registered by the files of this package that
// do each kind of work (register in an init function of that file).
var extraOps = map[string]Handler{}

func register(name string, h Handler) { extraOps[name] = h }

func ping(c *Call) (any, error) {
	var a proto.PingArgs
	if err := c.DecodeArgs(&a); err != nil {
		return nil, err
	}
	return proto.PingResult{PID: os.Getpid()}, nil
}
