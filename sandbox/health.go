package sandbox

import (
	"context"
	"errors"
)

// Probe starts a real jail with the default profile and runs a command in
// it: the readiness check that jails work on this host now (bwrap present,
// namespaces allowed, cgroups writable). It returns why not.
func Probe(ctx context.Context) error {
	bwrap, err := FindBwrap("")
	if err != nil {
		return err
	}
	if c := tryJail(ctx, bwrap); !c.OK {
		return errors.New(c.Detail)
	}
	return nil
}
