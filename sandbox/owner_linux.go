package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// How a workspace and a home are handed to the unprivileged uid a jail runs
// as when the server is root.

// prepareWorkspace gives the jail's uid the workspace when the server runs
// as root and the workspace still belongs to root.
func prepareWorkspace(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", dir, err)
	}
	if err := checkTraversable(dir, cred); err != nil {
		return err
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid == cred.Uid {
		return nil
	}
	if systemDir(dir) {
		return fmt.Errorf("workspace %s is a system directory owned by root: the jail runs as uid %d "+
			"and warren will not hand it over; use a directory of your own", dir, cred.Uid)
	}
	// Grant, don't give: owners stay as they are. Only a file system
	// without ACLs gets the tree handed over with chown.
	err = GrantTree(dir, int(cred.Uid))
	if errors.Is(err, errNoACL) {
		return ChownTree(dir, int(cred.Uid), int(cred.Gid))
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
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("home %s: %w", dir, err)
	}
	if fi.Sys().(*syscall.Stat_t).Uid == cred.Uid {
		return nil
	}
	return ChownTree(dir, int(cred.Uid), int(cred.Gid))
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

// systemDir reports whether dir is one the server must never chown: the
// root, a top-level directory, or anything under the system trees.
func systemDir(dir string) bool {
	dir = filepath.Clean(dir)
	if strings.Count(dir, "/") <= 1 {
		return true
	}
	for _, p := range []string{"/usr/", "/etc/", "/proc/", "/sys/", "/dev/", "/boot/", "/bin/", "/sbin/", "/lib"} {
		if strings.HasPrefix(dir+"/", p) {
			return true
		}
	}
	return false
}

// ChownTree gives uid:gid every file under dir, without following
// symlinks. The server uses it, as root, to hand a workspace to the
// unprivileged uid a jail runs as.
func ChownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
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
