package main

import (
	"strings"
	"testing"

	"github.com/warrenhq/warren/sessions"
)

// TestConsoleIdentitiesPage: the Identities page lists the signed-in
// user's identities with their author and public key (to copy into a
// forge), says which has a token, shows no secret, and passes axe-core at
// a desktop's and a phone's width in both schemes.
func TestConsoleIdentitiesPage(t *testing.T) {
	needJail(t)
	axeJS := axeSource(t)
	data := jailDir(t)
	pub := createIdentity(t, data, sessions.LocalUser(), "work")
	warrenCLI(t, "ghp_consoleTestToken0123456789", "identity", "create", "--data-dir", data, "--user", sessions.LocalUser(),
		"--name", "web", "--author-name", "Grace Hopper", "--author-email", "grace@example.org", "--no-key", "--token-file", "-")
	createIdentity(t, data, "someone-else", "theirs")
	srv := startConsole(t, data, "127.0.0.1:0")
	b := signedIn(t, srv)
	p := consolePage{name: "identities", path: "/#/identities", loaded: `document.body.dataset.identitiesLoaded === "2"`}
	if problems := checkPage(t, b, axeJS, p); len(problems) > 0 {
		t.Fatalf("%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	var key string
	b.eval(`document.querySelector('[data-identity="work"] textarea.public-key').value`, &key)
	if key != pub {
		t.Fatalf("the page shows the key %q, want %q", key, pub)
	}
	text := b.text("main")
	for _, want := range []string{"Ada Lovelace <ada@example.org>", "Grace Hopper <grace@example.org>", "none (a token only)", "yes: https clones"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the page does not say %q:\n%s", want, text)
		}
	}
	for _, secret := range []string{"PRIVATE", "ghp_consoleTestToken", "theirs"} {
		if strings.Contains(text, secret) {
			t.Fatalf("the page shows %q:\n%s", secret, text)
		}
	}
}
