package workspace

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/warrenhq/warren/sessions/errs"
)

// ErrDiskFull is a workspace that could not be made or written because the
// disk holding the server's sessions is full (or the server's quota on it
// is spent).
var ErrDiskFull = errs.New(errs.Unavailable, "the disk holding the server's sessions is full")

// FullDisk returns err as it is, unless a write failed for lack of space;
// then an error (ErrDiskFull, code unavailable) that says so and what to
// do, in place of the system's text: that names files of the server
// (`write /srv/warren/workspaces/s-…/.git/HEAD: no space left on device`),
// which a caller has no business seeing. what says what failed
// ("could not create the session").
func FullDisk(err error, what string) error {
	if err == nil || errors.Is(err, ErrDiskFull) || !noSpace(err) {
		return err
	}
	return fmt.Errorf("%s: %w: free space on the server (its operator's job), or delete sessions you no longer "+
		"need (session_control with action delete), then retry", what, ErrDiskFull)
}

// noSpace reports whether err is a write refused for lack of space. Some
// layers (git's) keep only the text of the system's error.
func noSpace(err error) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}
