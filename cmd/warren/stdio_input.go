package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// pollableStdin returns stdin for the stdio server to read requests from,
// as a descriptor the Go runtime's poller waits on when stdin is a pipe or
// a socket, and a function that puts stdin back as it was.
//
// os.Stdin reads in blocking mode: between requests a thread sits in
// read(2) holding one of the runtime's processors, which the runtime's
// monitor takes back after 20 µs and hands to another thread, and it then
// keeps polling every 20 µs instead of backing off. On a 2-core machine
// that churn (thread wake-ups, context switches) cost shell_exec about
// 40 µs of its p50 (docs/operations.md). In non-blocking mode, a read with
// nothing to read parks only the goroutine.
//
// O_NONBLOCK belongs to the open file description, which a process that
// handed us the same description (a shell's `< fifo`) shares: restore
// puts the mode back when the server is done. A terminal, a regular file
// or /dev/null is returned as it is: nothing there needs the poller, and
// a terminal left non-blocking would break the shell it belongs to if
// the server were killed.
func pollableStdin(stdin *os.File) (in *os.File, restore func()) {
	fd := int(stdin.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return stdin, func() {}
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFIFO && t != unix.S_IFSOCK {
		return stdin, func() {}
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK != 0 {
		return stdin, func() {} // already non-blocking: os.Stdin polls it
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return stdin, func() {}
	}
	// A second *os.File for descriptor 0: os.NewFile sees O_NONBLOCK and
	// registers it with the poller. It is never closed, and keepStdin
	// keeps it from being collected (its finalizer would close 0).
	in = os.NewFile(uintptr(fd), stdin.Name())
	keepStdin = append(keepStdin, in)
	return in, func() { _ = unix.SetNonblock(fd, false) }
}

// keepStdin holds the pollable stdin files made by pollableStdin, so that
// their finalizers never close descriptor 0.
var keepStdin []*os.File
