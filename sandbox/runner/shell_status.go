package runner

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/warrenhq/warren/sandbox/runner/proto"
)

// statusRecord is what the shell writes to its status descriptor (its
// stdout between commands) after each command: `export -p`, then the exit
// code and working directory framed by markers carrying the command's
// nonce.
//
//	<export -p>W<nonce> <exit>\n<cwd>\nW<nonce>X\n
type statusRecord struct {
	exitCode int
	cwd      string
	exports  []byte
}

// parseStatus reads the record for nonce from buf, everything the status
// descriptor carried since the command began; ok is false while it is
// incomplete. Nothing but the shell's trailer writes there (commands run
// with the descriptor redirected), so the exports are all that comes
// before the exit code line.
func parseStatus(buf []byte, nonce string) (rec statusRecord, ok bool, err error) {
	endMark := []byte("\nW" + nonce + "X\n")
	if !bytes.HasSuffix(buf, endMark) {
		return rec, false, nil
	}
	body := buf[:len(buf)-len(endMark)]
	head := []byte("W" + nonce + " ")
	i := -1
	if bytes.HasPrefix(body, head) {
		i = 0
	} else if k := bytes.Index(body, append([]byte("\n"), head...)); k >= 0 {
		i = k + 1
	}
	if i < 0 {
		return rec, false, errors.New("status record: no exit code line")
	}
	rec.exports = body[:i]
	rest := body[i+len(head):]
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 {
		return rec, false, errors.New("status record: no working directory")
	}
	rec.exitCode, err = strconv.Atoi(string(rest[:nl]))
	if err != nil {
		return rec, false, errors.New("status record: exit code")
	}
	rec.cwd = string(rest[nl+1:])
	return rec, true, nil
}

// addStatus appends what the status pipe carried. Past twice
// proto.StatusCap it moves all but the last StatusCap bytes to stdout (a
// record comes last, so the bytes kept still end with it); moving in
// halves keeps the cost of the copy at one per byte.
func (r *run) addStatus(p []byte) {
	r.status = append(r.status, p...)
	if len(r.status) >= 2*proto.StatusCap {
		extra := len(r.status) - proto.StatusCap
		r.sink.write(proto.RecStdout, r.status[:extra])
		r.status = append(r.status[:0], r.status[extra:]...)
	}
}

// keepExitOutput adds to the command's stdout what the shell wrote to its
// own stdout, the status pipe, while it exited: dash undoes a command's
// redirections before it runs the EXIT trap, so `trap 'echo bye' EXIT;
// exit` prints "bye" there, after everything the command wrote to the
// output pipes and where no record will follow. Called once the shell is
// gone without a record.
//
// The one other thing a dead shell may have left there is the start of its
// trailer's `export -p`, when a signal killed it in the middle (it never
// runs an EXIT trap then): that is state, not output, and is dropped.
func (r *run) keepExitOutput(p *shellProc) {
	if r.recOK {
		return
	}
	p.readNow(r.addStatus)
	out := r.status
	if i := bytes.Index(out, []byte("W"+r.nonce+" ")); i >= 0 {
		out = out[:i] // the start of the record
	}
	if p.exitCode > 128 && bytes.HasPrefix(out, []byte("export ")) {
		return
	}
	r.sink.write(proto.RecStdout, out)
	r.status = nil
}

// script wraps a command in the protocol. Between commands the shell's
// stdout is the status pipe; 6 is /dev/null, 7 and 8 the output pipes.
//
// The leading `:` lets dash reap background jobs that ended while it
// waited for this line, so that `kill -0 $!` sees them gone. `command eval`
// keeps the shell alive on a syntax error (plain eval would exit dash). Its
// redirections give the command /dev/null as stdin (off the command pipe)
// and the stdout pipe as stdout, and make whatever the command does to
// descriptors 0 and 1 its own: the shell restores them after, so the
// command cannot reach the command or status pipe by those numbers, and a
// background job never holds either. Descriptor 2 is the stderr pipe
// throughout, so the trailer's exec puts it back (2>&8) instead of a third
// saved redirection (dash spends six system calls on one). Only builtins
// run after the command, so the trailer works with PATH unset or no
// processes left. Its exec also checks that the command left 6, 7 and 8
// open (a failed redirection of exec ends the shell, before the record: a
// restart is all such a command costs), then it writes the status record.
// The output pipes carry no markers: the record comes after everything the
// command wrote to them, and the runner drains them once it has the record.
func script(command, nonce string) string {
	return ": ; command eval " + shellQuote(command) + " <&6 >&7; __warren_status=$?; " +
		"exec 2>&8 9<&6 9>&7 9>&-; export -p; " +
		"printf 'W%s %d\\n%s\\nW%sX\\n' " + nonce + " \"$__warren_status\" \"$PWD\" " + nonce + "\n"
}

// shellQuote quotes s as one single-quoted shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// MayStartJobs reports whether a command can leave children of the shell
// itself behind: only `&` run by the shell does, directly or through eval,
// source or ".". Other commands skip re-reading the shell's children, a
// /proc read that would otherwise cost every command.
func MayStartJobs(command string) bool {
	if strings.Contains(command, "&") || strings.Contains(command, "eval") || strings.Contains(command, "source") {
		return true
	}
	// "." used as the source builtin: a dot after a separator (or at the
	// start) and before a blank.
	for i := 0; i < len(command); i++ {
		if command[i] != '.' || i+1 >= len(command) || !isBlank(command[i+1]) {
			continue
		}
		if i == 0 || isBlank(command[i-1]) || strings.IndexByte(";&|(", command[i-1]) >= 0 {
			return true
		}
	}
	return false
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

// signalCommand sends sig to the shell's children that are not background
// jobs of earlier commands (those alive when the previous command ended),
// and to everything below them: the running command and whatever it
// spawned. It returns how many processes were signalled.
func signalCommand(shellPID int, background []int, sig syscall.Signal) int {
	n := 0
	for _, child := range ShellChildren(shellPID) {
		if slices.Contains(background, child) {
			continue
		}
		// The whole tree first: a killed parent's children move away.
		tree := []int{child}
		for i := 0; i < len(tree); i++ {
			tree = append(tree, Children(tree[i])...)
		}
		for _, pid := range tree {
			if syscall.Kill(pid, sig) == nil {
				n++
			}
		}
	}
	return n
}
