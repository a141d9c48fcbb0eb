package identity

import (
	"testing"

	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"github.com/warrenhq/warren/sessions/errs"
)

// go-git reads the server user's ~/.ssh/config (host aliases, ports) for
// every ssh URL unless told not to: with this package linked, it reads none.
func TestNoSSHConfig(t *testing.T) {
	if gitssh.DefaultSSHConfig != nil {
		t.Fatal("go-git still reads ~/.ssh/config")
	}
}

// A token is never sent over plain http, and only ssh and https remotes
// are accepted.
func TestParseRemote(t *testing.T) {
	for raw, want := range map[string]bool{
		"git@github.com:o/r.git":      true,
		"ssh://git@host:2222/o/r.git": true,
		"https://host/o/r.git":        true,
		"http://host/o/r.git":         false,
		"git://host/o/r.git":          false,
		"/srv/repo.git":               false,
	} {
		_, err := ParseRemote(raw)
		if (err == nil) != want || err != nil && errs.CodeOf(err) != errs.Invalid {
			t.Errorf("%s: %v", raw, err)
		}
	}
}
