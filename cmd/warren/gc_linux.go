package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseImagePages unmaps the pages of warren's own executable that the
// process has mapped but not written: code and read-only tables (types,
// the function table) touched at start, most of them by package
// initialization and never again. An idle server's RSS was mostly these
// (34 of 43 MB after start): the kernel maps each touched page with its
// fifteen neighbours, and start-up touches the binary in hundreds of
// places.
//
// MADV_DONTNEED on a clean, read-only, private file mapping only drops the
// page-table entries: the pages stay in the page cache, shared with every
// other warren, and the next use of one costs a minor fault. Mappings that
// are writable, or hold a page of the process's own (Anonymous above zero:
// a relocated or copied-on-write page), are left alone, since dropping
// those would lose what was written. (Private_Dirty is no sign of that: a
// binary written moments ago has dirty pages in the page cache until they
// reach the disk, and smaps counts them there.)
func releaseImagePages() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return
	}
	defer f.Close()
	type mapping struct {
		start, end uint64
		clean      bool
	}
	var keep []mapping
	var cur *mapping
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if fields := bytes.Fields(line); len(fields) >= 5 && bytes.IndexByte(fields[0], '-') > 0 && !bytes.HasSuffix(fields[0], []byte(":")) {
			cur = nil
			// start-end perms offset dev inode path
			if len(fields) < 6 || string(fields[5]) != exe || bytes.IndexByte(fields[1], 'w') >= 0 || fields[1][3] != 'p' {
				continue
			}
			lo, hi, _ := strings.Cut(string(fields[0]), "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || end <= start {
				continue
			}
			keep = append(keep, mapping{start: start, end: end, clean: true})
			cur = &keep[len(keep)-1]
			continue
		}
		if cur == nil {
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("Anonymous:")); ok {
			if f := bytes.Fields(v); len(f) == 0 || string(f[0]) != "0" {
				cur.clean = false
			}
		}
	}
	if sc.Err() != nil {
		return
	}
	for _, m := range keep {
		if !m.clean {
			continue
		}
		// The raw call: the range is the kernel's, not a Go object, so no
		// slice over it is made.
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_DONTNEED)
	}
}
