package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Policy says which sources a caller may use. The zero Policy is the
// strictest: https URLs of public hosts only.
type Policy struct {
	// Local allows paths of this host and file:// URLs, and with them bind
	// mode. A path is a window onto the host's files: only callers the
	// operator trusts with them get it.
	Local bool
	// Trusted callers are the host's operator (stdio, the CLI, HTTP with
	// --auth none on loopback): every scheme, every address, the server's
	// own ssh agent and proxy settings. Others get https (and ssh with
	// their own identity) to public addresses only, checked on the address
	// actually dialed.
	Trusted bool
	// DataDir is the server's data directory, resolved: no local source
	// may be it, be inside it or contain it (it holds the token database
	// and every other session's workspace and audit).
	DataDir string
	// NoRootOwned refuses local sources owned by root: set for callers who
	// are not the operator when the server runs as root, so that a token
	// holder cannot have root's own trees handed to a jail.
	NoRootOwned bool
	// NoBind refuses bind mode: the sessions' workspaces live away from
	// this host (Kubernetes sandboxes), where no directory of it can be
	// worked in place. A local repository is still cloned.
	NoBind bool

	// allowLoopback lets this package's tests clone from an httptest server
	// on 127.0.0.1 under an untrusted policy; nothing else is relaxed.
	allowLoopback bool
	// identity says the clone logs in with the caller's own git identity
	// (Spec.Auth): ssh is then the caller's to use, through SSHProxy.
	identity bool
}

// check decides whether the caller may use src in mode, before anything
// is opened.
func (p Policy) check(src Source, mode Mode) error {
	if p.NoBind && mode == Bind {
		return errNoBind
	}
	if src.Local() {
		if !p.Local {
			return invalid("source %q is a path on the server's host, and this server only accepts remote git "+
				"URLs (https); its operator can allow local paths with --allow-local-sources", src.Raw)
		}
		return nil
	}
	if mode == Bind {
		return invalid("source %s is a URL, and bind works in a directory of the server in place: use mode clone "+
			"to copy the repository", displayURL(src))
	}
	if p.Trusted {
		return nil
	}
	switch src.URL.Scheme {
	case "https":
	case "ssh":
		if p.identity {
			return nil
		}
		return invalid("source %s: ssh URLs are not accepted over this server's HTTP transport, because the clone "+
			"would log in with the server's own ssh keys; use the repository's https URL", displayURL(src))
	default:
		return invalid("source %s: %s:// is not accepted over this server's HTTP transport; use the repository's https URL",
			displayURL(src), src.URL.Scheme)
	}
	return nil
}

// errNoBind is bind mode refused under Policy.NoBind.
var errNoBind = invalid("bind mode is not available on this server: its sessions run in Kubernetes sandboxes, away from " +
	"the server's host; clone a git repository (a URL, or a local repository with mode clone) instead")

// systemTrees are directories that belong to the operating system, its
// configuration, the kernel's interfaces, runtime state or root's home:
// neither they nor anything under them is a workspace. /var is refused as
// a whole: it holds package databases, logs, mail, spools and other
// services' state, and warren's own default data directory when root.
var systemTrees = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/nix",
	"/proc", "/root", "/run", "/sbin", "/snap", "/sys", "/usr", "/var"}

// systemDir says why a resolved directory is not a workspace, or "".
// The root and every top-level directory are refused too (/home, /tmp,
// /srv, /opt, /mnt hold everyone's trees); directories under those are
// people's own.
func systemDir(real string) string {
	if real == "/" || strings.Count(real, "/") == 1 {
		return real + " is a system directory"
	}
	for _, t := range systemTrees {
		if real == t || strings.HasPrefix(real, t+"/") {
			return real + " is a system directory (under " + t + ")"
		}
	}
	return ""
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// LocalDir is a local directory opened (without O_NOFOLLOW: links are
// followed) and resolved through its descriptor, so that what is checked
// is the directory itself, not a path someone can change afterwards.
type LocalDir struct {
	fd   int
	Real string // where it is, read from the descriptor
	Uid  uint32
	// Stamp is the opened directory's identity, owner and place.
	Stamp Stamp
}

// Close releases the descriptor.
func (d *LocalDir) Close() { unix.Close(d.fd) }

// File returns a second descriptor of the opened directory, named name,
// for a runner that binds it into a jail by descriptor; the caller owns it.
func (d *LocalDir) File(name string) (*os.File, error) {
	fd, err := unix.FcntlInt(uintptr(d.fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, &os.PathError{Op: "dup", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// ProcPath names the opened directory itself, whatever its path now: open
// beneath it (os.OpenRoot(d.ProcPath())) to act on what was checked.
func (d *LocalDir) ProcPath() string { return "/proc/self/fd/" + strconv.Itoa(d.fd) }

// Stamp is what a directory's check depends on: its identity (device and
// inode), its mode and owner, and where it is (the path its descriptor
// resolves to). Equal stamps taken at two moments mean the same directory
// at the same place with the same owner, so a check made on the first
// still holds: a link or mount now leading elsewhere names another inode,
// the directory or any directory above it moved changes where it is, and
// chown or chmod change the rest. What the directory holds is not in it:
// files coming and going cost no check. The zero Stamp matches no
// directory.
type Stamp struct {
	dev, ino  uint64
	mode, uid uint32
	real      string
}

func dirStampOf(st *unix.Stat_t, real string) Stamp {
	return Stamp{dev: st.Dev, ino: st.Ino, mode: st.Mode, uid: st.Uid, real: real}
}

// Reopen opens dir again when it still leads to the directory st was
// taken of, at the same place, with the same mode and owner: opened
// without following any link (a link anywhere on the way, such as a parent
// moved elsewhere with a link left in its place, fails), then one fstat.
// It returns nil otherwise, and the caller checks the directory in full.
// What passed once and is the same directory at the same place passes
// again, in two system calls and none through /proc: the check of every
// use when nothing changed.
func (st Stamp) Reopen(dir string) *LocalDir {
	if st == (Stamp{}) || dir != st.real {
		return nil
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_DIRECTORY,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return nil
	}
	var now unix.Stat_t
	if unix.Fstat(fd, &now) != nil || dirStampOf(&now, dir) != st {
		unix.Close(fd)
		return nil
	}
	return &LocalDir{fd: fd, Real: dir, Uid: now.Uid, Stamp: st}
}

// OpenDir opens the directory dir leads to (links followed), reads where
// it is from the descriptor and stamps it, without judging it (Check).
// The caller closes it.
func OpenDir(dir string) (*LocalDir, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	d := &LocalDir{fd: fd}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		d.Close()
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		d.Close()
		return nil, errNotDir
	}
	real, err := d.Resolve()
	if err != nil {
		d.Close()
		return nil, &os.PathError{Op: "resolve", Path: dir, Err: err}
	}
	d.Uid, d.Stamp = st.Uid, dirStampOf(&st, real)
	return d, nil
}

// errNotDir is what OpenDir says of anything but a directory.
var errNotDir = errors.New("not a directory")

// Resolve reads where the opened directory is, from its descriptor.
func (d *LocalDir) Resolve() (string, error) {
	real, err := os.Readlink(d.ProcPath())
	if err == nil && !strings.HasPrefix(real, "/") {
		err = fmt.Errorf("%q is not a path", real)
	}
	if err != nil {
		return "", err
	}
	d.Real = real
	return real, nil
}

// OpenLocal opens dir (relative paths against the working directory),
// resolves it and checks it against p: a local source must be a directory
// that is not a system directory, not the data directory's relative, and
// not root's when p says so. The caller closes it.
func OpenLocal(dir string, p Policy) (*LocalDir, error) {
	d, err := OpenSource(dir)
	if err != nil {
		return nil, err
	}
	if err := d.Check(dir, p); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// OpenSource is OpenDir with the errors of a local source, for a caller
// that checks the directory itself (Check).
func OpenSource(dir string) (*LocalDir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, invalid("source %s: %v", dir, err)
	}
	d, err := OpenDir(abs)
	if err != nil {
		var open *os.PathError
		switch {
		case errors.Is(err, errNotDir):
			return nil, invalid("source %s is not a directory", dir)
		case errors.As(err, &open):
			return nil, invalid("source %s: no such directory (%v)", dir, open.Err)
		}
		return nil, fmt.Errorf("source %s: %w", dir, err)
	}
	return d, nil
}

// Check resolves the opened directory and applies p's rules to it; asked
// is the path it was opened by, for messages.
func (d *LocalDir) Check(asked string, p Policy) error {
	if _, err := d.Resolve(); err != nil {
		return invalid("source %s: cannot tell where it is (%v)", asked, err)
	}
	return p.checkDir(asked, d)
}

// checkDir applies the rules to an opened directory.
func (p Policy) checkDir(asked string, d *LocalDir) error {
	shown := asked
	if asked != d.Real {
		shown = asked + " (" + d.Real + ")"
	}
	if why := systemDir(d.Real); why != "" {
		return invalid("source %s: %s; use a directory of your own", shown, why)
	}
	if p.DataDir != "" && (under(d.Real, p.DataDir) || under(p.DataDir, d.Real)) {
		return invalid("source %s is or holds warren's data directory %s, where other sessions and the "+
			"server's database live; use a directory outside it", shown, p.DataDir)
	}
	if p.NoRootOwned && d.Uid == 0 {
		return invalid("source %s belongs to root: over HTTP warren works only in directories that belong to a "+
			"user; its operator can chown it to one, or bind it for everyone with --workspace", shown)
	}
	// The path must still name what was opened: a rename between the open
	// and the readlink would otherwise leave a checked path that is not
	// the opened directory.
	var now unix.Stat_t
	if err := unix.Stat(d.Real, &now); err != nil || now.Dev != d.Stamp.dev || now.Ino != d.Stamp.ino {
		return invalid("source %s changed while it was checked; try again", shown)
	}
	return nil
}

// CheckDir resolves a stored workspace and checks it against p: what a
// session's every use does, so that a row from an older version, or a
// path whose links changed since, is refused before any file is touched.
// It returns the resolved path.
func CheckDir(dir string, p Policy) (string, error) {
	d, err := OpenLocal(dir, p)
	if err != nil {
		return "", err
	}
	defer d.Close()
	return d.Real, nil
}
