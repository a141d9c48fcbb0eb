package sandbox

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// deniedSyscalls are refused with EPERM inside every jail that has a
// seccomp filter: kernel attack surface a shell never needs (SANDBOX.md).
// Most also need capabilities the jail lacks; the filter is the second
// wall. ptrace is among them, so strace and gdb do not work in a jail.
var deniedSyscalls = []uint32{
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_KEYCTL,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE,
	unix.SYS_DELETE_MODULE, unix.SYS_REBOOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT,
}

// Classic BPF, as seccomp reads it.
const (
	bpfLdWAbs  = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK    = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK    = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfRetK    = 0x06 // BPF_RET | BPF_K
	offsetNr   = 0    // seccomp_data.nr
	offsetArch = 4    // seccomp_data.arch
	retAllow   = 0x7fff0000
	retEPERM   = 0x00050000 | uint32(unix.EPERM)
	// x32Bit marks x32 system calls on x86-64: another numbering, refused.
	x32Bit = 0x40000000
)

type bpfInsn struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

// seccompProgram returns the filter bwrap loads with --seccomp, encoded as
// struct sock_filter[] in host byte order, or nil on an architecture it
// does not know (the jail then runs without one).
func seccompProgram() []byte {
	if auditArch == 0 {
		return nil
	}
	n := len(deniedSyscalls)
	// Layout: 0 load arch; 1 foreign arch → deny; 2 load nr; 3 x32 → deny;
	// 4..4+n-1 each denied nr → deny; then allow; then deny.
	prog := []bpfInsn{
		{code: bpfLdWAbs, k: offsetArch},
		{code: bpfJeqK, jt: 1, jf: 0, k: auditArch},
		{code: bpfRetK, k: retEPERM},
		{code: bpfLdWAbs, k: offsetNr},
	}
	denyAt := len(prog) + 1 + n + 1 // index of the final deny return
	prog = append(prog, bpfInsn{code: bpfJgeK, k: x32Bit})
	for _, nr := range deniedSyscalls {
		prog = append(prog, bpfInsn{code: bpfJeqK, k: nr})
	}
	prog = append(prog, bpfInsn{code: bpfRetK, k: retAllow}, bpfInsn{code: bpfRetK, k: retEPERM})
	for i := 4; i < 4+1+n; i++ {
		prog[i].jt = uint8(denyAt - i - 1) // jumps count from the next instruction
	}
	out := make([]byte, 0, 8*len(prog))
	for _, in := range prog {
		out = binary.NativeEndian.AppendUint16(out, in.code)
		out = append(out, in.jt, in.jf)
		out = binary.NativeEndian.AppendUint32(out, in.k)
	}
	return out
}
