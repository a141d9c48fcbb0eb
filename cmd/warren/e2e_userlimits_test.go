package main

import "testing"

// TestShellsPerUserAreCapped is issue 9 item 11 end to end: with
// --max-shells-per-user 1, a user's second running shell is refused with
// what to do; another user is not counted with them; pausing a session
// makes room.
func TestShellsPerUserAreCapped(t *testing.T) {
	needJail(t)
	data := jailDir(t)
	aliceTok, bobTok := createToken(t, data, "alice"), createToken(t, data, "bob")
	srv := serveHTTP(t, "--data-dir", data, "--max-shells-per-user", "1", "--memory-per-user", "512M", "--cpus-per-user", "1")
	alice, bob := connectHTTP(t, srv, aliceTok), connectHTTP(t, srv, bobTok)

	one := alice.ok("session_create", map[string]any{"name": "one"})["session_id"].(string)
	two := alice.ok("session_create", map[string]any{"name": "two"})["session_id"].(string)
	alice.exec("echo one", "session_id", one)
	alice.fails("shell_exec", map[string]any{"command": "echo two", "session_id": two},
		"you already run 1 shells, the limit per user is 1: pause a session")
	if got := bob.exec("echo bob"); got["stdout"] != "bob\n" {
		t.Fatalf("bob's shell: %v", got)
	}
	alice.ok("session_control", map[string]any{"session_id": one, "action": "pause"})
	if got := alice.exec("echo two", "session_id", two); got["stdout"] != "two\n" {
		t.Fatalf("alice's second session after pausing the first: %v", got)
	}
}
