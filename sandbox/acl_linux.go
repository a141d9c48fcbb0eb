package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"
)

// POSIX ACLs as the kernel stores them in the system.posix_acl_* extended
// attributes: a version word, then (tag, perm, id) entries sorted by tag
// and id.
const (
	aclVersion  = 2
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20

	xattrACLAccess  = "system.posix_acl_access"
	xattrACLDefault = "system.posix_acl_default"
)

type aclEntry struct {
	tag, perm uint16
	id        uint32
}

// errNoACL says the file system cannot hold POSIX ACLs.
var errNoACL = errors.New("the file system does not support POSIX ACLs")

// grantTree gives uid read and write access to every file and directory
// under root through POSIX ACLs, and makes new files inherit that access,
// without changing any owner or mode bit: a root-owned checkout stays
// root's (git refuses repositories owned by someone else), yet the jail's
// unprivileged uid can work in it. The tree is walked by descriptors (see
// tree_linux.go): a symlink, even one a running jail swaps in while the
// walk runs, is never followed, and only regular files and directories on
// root's own mount are changed.
func grantTree(root *treeRoot, uid uint32) error {
	return root.walk(func(e *treeEntry) error { return grant(e, uid) })
}

func grant(e *treeEntry, uid uint32) error {
	perm := uint16(6) // rw
	if e.isDir() || e.perm()&0o100 != 0 {
		perm = 7 // directories need x to be entered; keep executables runnable
	}
	if err := setACL(e, xattrACLAccess, uid, perm); err != nil {
		return err
	}
	if e.isDir() {
		return setACL(e, xattrACLDefault, uid, 7)
	}
	return nil
}

// setACL adds (or replaces) a named-user entry in the entry's ACL, building the
// base entries from the mode when there is no ACL yet, and recomputes the
// mask so the entry takes effect.
func setACL(e *treeEntry, attr string, uid uint32, perm uint16) error {
	entries, err := readACL(e, attr)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		m := e.perm()
		entries = []aclEntry{{tag: aclUserObj, perm: m >> 6 & 7}, {tag: aclGroupObj, perm: m >> 3 & 7}, {tag: aclOther, perm: m & 7}}
		if attr == xattrACLDefault {
			entries[0].perm = 7 // new files keep their owner's full access
		}
	}
	var out []aclEntry
	mask := uint16(0)
	for _, e := range entries {
		switch {
		case e.tag == aclMask, e.tag == aclUser && e.id == uid:
			continue
		case e.tag == aclGroupObj || e.tag == aclUser || e.tag == aclGroup:
			mask |= e.perm
		}
		out = append(out, e)
	}
	out = append(out, aclEntry{tag: aclUser, perm: perm, id: uid}, aclEntry{tag: aclMask, perm: mask | perm})
	sort.Slice(out, func(i, j int) bool {
		if out[i].tag != out[j].tag {
			return out[i].tag < out[j].tag
		}
		return out[i].id < out[j].id
	})
	buf := make([]byte, 4+8*len(out))
	binary.LittleEndian.PutUint32(buf, aclVersion)
	for i, e := range out {
		b := buf[4+8*i:]
		binary.LittleEndian.PutUint16(b, e.tag)
		binary.LittleEndian.PutUint16(b[2:], e.perm)
		id := e.id
		if e.tag != aclUser && e.tag != aclGroup {
			id = 0xffffffff // ACL_UNDEFINED_ID
		}
		binary.LittleEndian.PutUint32(b[4:], id)
	}
	if err := unix.Setxattr(e.procPath(), attr, buf, 0); err != nil {
		if errors.Is(err, syscall.EOPNOTSUPP) {
			return errNoACL
		}
		return fmt.Errorf("set ACL of %s: %w", e.path, err)
	}
	return nil
}

// readACL returns the entry's ACL entries, or none when it has no ACL.
func readACL(e *treeEntry, attr string) ([]aclEntry, error) {
	buf := make([]byte, 512)
	for {
		n, err := unix.Getxattr(e.procPath(), attr, buf)
		if errors.Is(err, syscall.ERANGE) && len(buf) < 64<<10 { // the kernel's cap on an xattr
			buf = make([]byte, len(buf)*4)
			continue
		}
		if errors.Is(err, unix.ENODATA) {
			return nil, nil
		}
		if errors.Is(err, syscall.EOPNOTSUPP) {
			return nil, errNoACL
		}
		if err != nil {
			return nil, fmt.Errorf("read ACL of %s: %w", e.path, err)
		}
		buf = buf[:n]
		break
	}
	if len(buf) < 4 || binary.LittleEndian.Uint32(buf) != aclVersion || (len(buf)-4)%8 != 0 {
		return nil, fmt.Errorf("read ACL of %s: unknown format", e.path)
	}
	var out []aclEntry
	for b := buf[4:]; len(b) >= 8; b = b[8:] {
		out = append(out, aclEntry{tag: binary.LittleEndian.Uint16(b), perm: binary.LittleEndian.Uint16(b[2:]), id: binary.LittleEndian.Uint32(b[4:])})
	}
	return out, nil
}
