package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// How a workspace and a home are handed to the unprivileged uid a jail runs
// as when the server is root.

// prepareWorkspace gives the jail's uid the workspace when the server runs
// as root and the workspace still belongs to root.
// It opens the directory through open (the shell's descriptor of it, as
// /proc/self/fd/N), never by the path dir, which names it in messages.
func prepareWorkspace(dir, open string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := checkTraversable(dir, cred); err != nil {
		return err
	}
	root, err := openTree(open)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", dir, err)
	}
	defer root.close()
	if root.stat.Uid == cred.Uid {
		return nil
	}
	// Decide on where the opened directory really is: the path may run
	// through symlinks (rootlink -> /), even ones a jail controls.
	if systemDir(root.real) {
		return fmt.Errorf("workspace %s is the system directory %s: the jail runs as uid %d "+
			"and warren will not hand it over; use a directory of your own", dir, root.real, cred.Uid)
	}
	// Grant, don't give: owners stay as they are. Only a file system
	// without ACLs gets the tree handed over with chown.
	err = grantTree(root, cred.Uid)
	if errors.Is(err, errNoACL) {
		return chownTree(root, cred.Uid, cred.Gid)
	}
	return err
}

// prepareHome creates the jail's home directory and, when the server runs
// as root, gives it to the jail's uid: it is warren's, not the user's.
func prepareHome(dir string, cred *syscall.Credential) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("home %s: %w", dir, err)
	}
	if cred == nil {
		return nil
	}
	if err := checkTraversable(dir, cred); err != nil {
		return err
	}
	root, err := openTree(dir)
	if err != nil {
		return fmt.Errorf("home %s: %w", dir, err)
	}
	defer root.close()
	if root.stat.Uid == cred.Uid {
		return nil
	}
	return chownTree(root, cred.Uid, cred.Gid)
}

// checkTraversable makes sure the jail's uid can reach dir: bwrap resolves
// the bind source as that uid, so every ancestor must let it search.
func checkTraversable(dir string, cred *syscall.Credential) error {
	for p := filepath.Dir(filepath.Clean(dir)); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("workspace %s: %w", dir, err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		ok := mode&0o001 != 0 || st.Uid == cred.Uid && mode&0o100 != 0 || st.Gid == cred.Gid && mode&0o010 != 0
		if !ok {
			return fmt.Errorf("workspace %s: the jail runs as uid %d and cannot reach it, because %s is mode %04o; "+
				"put the workspace (or --data-dir) under a directory others can search, e.g. /var/lib/warren, "+
				"or run 'chmod o+x %s', or run warren as a regular user", dir, cred.Uid, p, mode, p)
		}
		if p == "/" {
			return nil
		}
	}
}

// systemDir reports whether dir is one the server must never hand to a
// jail: the root, a top-level directory, or anything under the system
// trees. It decides on the resolved path, so that <workspace>/rootlink/usr
// with rootlink -> / is /usr; a path that cannot be resolved is refused.
func systemDir(dir string) bool {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return true
	}
	real = filepath.Clean(real)
	if strings.Count(real, "/") <= 1 {
		return true
	}
	for _, p := range []string{"/usr/", "/etc/", "/proc/", "/sys/", "/dev/", "/boot/", "/bin/", "/sbin/", "/lib", "/run/", "/var/run/"} {
		if strings.HasPrefix(real+"/", p) {
			return true
		}
	}
	return false
}

// chownTree gives uid:gid every regular file and directory under root. It
// walks by descriptors like grantTree, never following a symlink. The
// server uses it, as root, to hand a home (or a workspace on a file system
// without ACLs) to the unprivileged uid a jail runs as.
func chownTree(root *treeRoot, uid, gid uint32) error {
	return root.walk(func(e *treeEntry) error {
		// AT_EMPTY_PATH changes the opened inode itself, O_PATH or not.
		if err := unix.Fchownat(e.fd, "", int(uid), int(gid), unix.AT_EMPTY_PATH); err != nil {
			return fmt.Errorf("chown %s: %w", e.path, err)
		}
		return nil
	})
}

// sourceWord finds "." used as the source builtin.
var sourceWord = regexp.MustCompile(`(^|[\s;&|(])\.\s`)

// mayStartJobs reports whether a command can leave children of the shell
// itself behind: only `&` run by the shell does, directly or through eval,
// source or ".". Other commands skip re-reading the shell's children, a
// /proc read that would otherwise cost every command.
func mayStartJobs(command string) bool {
	return strings.Contains(command, "&") || strings.Contains(command, "eval") ||
		strings.Contains(command, "source") || sourceWord.MatchString(command)
}
