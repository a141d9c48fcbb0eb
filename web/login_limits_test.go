package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// One user signing in again and again must not sign anybody else out:
// today's single table of 1,000 sign-ins evicted the oldest, whoever's.
func TestOneUserCannotSignOthersOut(t *testing.T) {
	s := newSite(t)
	bob, _, err := s.tokens.Create(context.Background(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	mallory, _, err := s.tokens.Create(context.Background(), "mallory")
	if err != nil {
		t.Fatal(err)
	}
	bobCookie, bobKey := s.signIn(`{"token":"` + bob + `"}`)
	answers := map[int]int{}
	for range 1001 {
		status, _, _ := s.post(LoginPath, s.url, "", "", `{"token":"`+mallory+`"}`)
		answers[status]++
	}
	t.Logf("mallory's 1001 sign-ins answered (status: count) %v", answers)
	if ok, body := s.works(bobCookie, bobKey); !ok {
		t.Fatalf("bob was signed out by mallory's sign-ins: %s", body)
	}
}

// A flood of sign-in attempts from one address is refused with 429 and a
// message that says when to try again; the limit passes with time.
func TestSignInFloodIsRefused(t *testing.T) {
	s := newSite(t)
	var refused int
	var msg, retry string
	for range 60 {
		req, _ := http.NewRequest("POST", s.url+LoginPath, strings.NewReader(`{"token":"wrn_guess"}`))
		req.Header.Set("Origin", s.url)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			refused++
			msg, retry = b.String(), resp.Header.Get("Retry-After")
		}
	}
	if refused == 0 {
		t.Fatal("60 sign-in attempts in a row from one address: none refused")
	}
	if !strings.Contains(msg, "too many sign-in attempts") || !strings.Contains(msg, "try again in") || retry == "" {
		t.Fatalf("the refusal says %q (Retry-After %q): want what happened and when to try again", msg, retry)
	}
	// A good token from the same address waits too, then works.
	tok, _, err := s.tokens.Create(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := s.post(LoginPath, s.url, "", "", `{"token":"`+tok+`"}`); status != http.StatusTooManyRequests {
		t.Fatalf("sign-in during the flood's limit: %d", status)
	}
	s.clock.advance(5 * time.Minute)
	if cookie, key := s.signIn(`{"token":"` + tok + `"}`); cookie == "" {
		t.Fatal("no sign-in after the limit passed")
	} else if ok, body := s.works(cookie, key); !ok {
		t.Fatalf("the sign-in after the limit: %s", body)
	}
}

// A user's sign-in beyond maxUserSessions ends that user's own least
// recently used sign-in, never anybody else's; signing in again and again
// as one user is slowed down with a message that names the user.
func TestNewSignInEndsOnlyTheUsersOwnOldest(t *testing.T) {
	s := newSite(t)
	bob, _, _ := s.tokens.Create(context.Background(), "bob")
	alice, _, _ := s.tokens.Create(context.Background(), "alice")
	bobCookie, bobKey := s.signIn(`{"token":"` + bob + `"}`)
	type signin struct{ cookie, key string }
	var mine []signin
	for range maxUserSessions + 1 {
		s.clock.advance(time.Minute) // within the user's rate
		c, k := s.signIn(`{"token":"` + alice + `"}`)
		mine = append(mine, signin{c, k})
	}
	if ok, body := s.works(mine[0].cookie, mine[0].key); ok || !strings.Contains(body, "sign in again") {
		t.Fatalf("alice's oldest sign-in after %d newer ones: still works (%s)", maxUserSessions, body)
	}
	for i, m := range mine[1:] {
		if ok, body := s.works(m.cookie, m.key); !ok {
			t.Fatalf("alice's sign-in %d: %s", i+2, body)
		}
	}
	if ok, body := s.works(bobCookie, bobKey); !ok {
		t.Fatalf("bob after alice's sign-ins: %s", body)
	}

	// Eleven more at once: the user's rate refuses some, with her name.
	var refusal string
	for range userBurst + 1 {
		if status, body, _ := s.post(LoginPath, s.url, "", "", `{"token":"`+alice+`"}`); status == http.StatusTooManyRequests {
			refusal = body
		}
	}
	if !strings.Contains(refusal, "too many sign-ins as alice") || !strings.Contains(refusal, "try again in") {
		t.Fatalf("the refusal of a burst of sign-ins as alice: %q", refusal)
	}
}

// When the console holds as many sign-ins as it keeps, a new one is
// refused with 503 and what to do; nobody is signed out to make room. A
// printed link refused this way stays usable.
func TestFullConsoleRefusesSignInsInsteadOfEndingOthers(t *testing.T) {
	s := newSite(t)
	s.console.logins.mu.Lock()
	s.console.logins.maxSessions = 3
	s.console.logins.mu.Unlock()
	type signin struct{ cookie, key string }
	var live []signin
	for _, user := range []string{"u1", "u2", "u3"} {
		tok, _, _ := s.tokens.Create(context.Background(), user)
		c, k := s.signIn(`{"token":"` + tok + `"}`)
		live = append(live, signin{c, k})
	}
	code := strings.TrimPrefix(s.console.LoginURL(s.url, "u4"), s.url+"/#code=")
	status, body, _ := s.post(LoginPath, s.url, "", "", `{"code":"`+code+`"}`)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "as many as it keeps") {
		t.Fatalf("a sign-in into a full console: %d %s", status, body)
	}
	for i, l := range live {
		if ok, body := s.works(l.cookie, l.key); !ok {
			t.Fatalf("u%d after the refused sign-in: %s", i+1, body)
		}
	}
	// u1 signs out: u4's link works now.
	if status, _, _ := s.postKey(LogoutPath, s.url, live[0].cookie, live[0].key, "", ""); status != http.StatusNoContent {
		t.Fatalf("u1 signs out: %d", status)
	}
	if c, k := s.signIn(`{"code":"` + code + `"}`); c == "" {
		t.Fatal("u4's link after u1 signed out")
	} else if ok, body := s.works(c, k); !ok {
		t.Fatalf("u4: %s", body)
	}
}

// The limiter holds a bounded number of addresses whatever a flood sends,
// and counts an IPv6 host's whole /64 as one address.
func TestSignInLimiterIsBounded(t *testing.T) {
	l := newLimiter(addrBurst, addrEvery)
	now := time.Now()
	for i := range 3 * maxLimiterKeys {
		l.take(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), now)
		if len(l.buckets) > maxLimiterKeys {
			t.Fatalf("%d addresses held after %d attempts", len(l.buckets), i+1)
		}
	}
	a := clientAddr(&http.Request{RemoteAddr: "[2001:db8:1:2::1]:4000"})
	b := clientAddr(&http.Request{RemoteAddr: "[2001:db8:1:2:ffff::9]:5000"})
	c := clientAddr(&http.Request{RemoteAddr: "[2001:db8:1:3::1]:4000"})
	if a != b || a == c || clientAddr(&http.Request{RemoteAddr: "127.0.0.1:1"}) != "127.0.0.1" {
		t.Fatalf("address keys: %q %q %q", a, b, c)
	}
}
