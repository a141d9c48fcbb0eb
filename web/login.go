package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"sync"
	"time"
)

// CookieName is the console's session cookie.
const CookieName = "warren_console"

// Lifetimes of the login secrets.
const (
	// codeTTL bounds how long a printed console link can be used.
	codeTTL = 24 * time.Hour
	// sessionIdle ends a console session unused for this long.
	sessionIdle = 12 * time.Hour
	// maxSessions bounds the console sessions kept; the least recently
	// used one is ended to make room.
	maxSessions = 1000
)

// Tokens checks bearer tokens (tokens.Store in mcp/tokens).
type Tokens interface {
	Authenticate(ctx context.Context, token string) (user string, err error)
}

// loginCode is a one-time code of a printed console link.
type loginCode struct {
	user    string
	expires time.Time
}

// consoleSession is what a session cookie stands for: a user, and the
// token it was opened with, if any, checked again on every request so that
// revoking the token ends the session too.
type consoleSession struct {
	user     string
	token    string // "" for a session opened with a login code
	lastUsed time.Time
	// ended says why the session ended while its cookie lives on (its
	// token was revoked): every later request gets the same reason.
	ended string
}

// ErrLoggedOut is returned for a cookie whose session has ended (logged
// out, expired, server restarted, token revoked).
var ErrLoggedOut = errors.New("the console session has ended: sign in again")

// logins holds the one-time codes and the sessions, in memory only: a
// restart of the server signs every console out and prints a new link.
type logins struct {
	tokens Tokens
	now    func() time.Time

	// mu protects the maps. Keys are SHA-256 hashes of the secrets, so
	// that a lookup's timing tells nothing about a secret's bytes.
	mu       sync.Mutex
	codes    map[string]loginCode
	sessions map[string]*consoleSession
}

func newLogins(tokens Tokens) *logins {
	return &logins{tokens: tokens, now: time.Now, codes: map[string]loginCode{}, sessions: map[string]*consoleSession{}}
}

func secret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never on Linux ≥ 3.17
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// newCode makes a one-time login code for user.
func (l *logins) newCode(user string) string {
	code := secret()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.codes[hash(code)] = loginCode{user: user, expires: l.now().Add(codeTTL)}
	return code
}

// trade exchanges a code, once, for a new session id.
func (l *logins) trade(code string) (string, error) {
	l.mu.Lock()
	c, ok := l.codes[hash(code)]
	delete(l.codes, hash(code)) // once, whatever happens next
	l.mu.Unlock()
	if !ok || l.now().After(c.expires) {
		return "", errors.New("this console link was already used or has expired: ask whoever runs the server for a new one (it is printed when 'warren serve http' starts), or sign in with a token")
	}
	return l.open(c.user, ""), nil
}

// tokenLogin opens a session for the user of a pasted token.
func (l *logins) tokenLogin(ctx context.Context, token string) (string, error) {
	if l.tokens == nil {
		return "", errors.New("this server does not use tokens")
	}
	user, err := l.tokens.Authenticate(ctx, token)
	if err != nil {
		return "", errors.New("that token is not valid (unknown or revoked): make one with 'warren token create --user NAME'")
	}
	return l.open(user, token), nil
}

func (l *logins) open(user, token string) string {
	id := secret()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.sessions) >= maxSessions {
		var oldest string
		var at time.Time
		for k, s := range l.sessions {
			if oldest == "" || s.lastUsed.Before(at) {
				oldest, at = k, s.lastUsed
			}
		}
		delete(l.sessions, oldest)
	}
	l.sessions[hash(id)] = &consoleSession{user: user, token: token, lastUsed: l.now()}
	return id
}

// user returns the user of a session id, checking its token again.
func (l *logins) user(ctx context.Context, id string) (string, error) {
	key := hash(id)
	now := l.now()
	l.mu.Lock()
	s, ok := l.sessions[key]
	if ok && now.Sub(s.lastUsed) > sessionIdle {
		delete(l.sessions, key)
		ok = false
	}
	var user, token, ended string
	if ok {
		s.lastUsed = now
		user, token, ended = s.user, s.token, s.ended
	}
	l.mu.Unlock()
	if !ok {
		return "", ErrLoggedOut
	}
	if ended != "" {
		return "", errors.New(ended)
	}
	if token != "" {
		if _, err := l.tokens.Authenticate(ctx, token); err != nil {
			const revoked = "the token this console signed in with was revoked: sign in again"
			l.mu.Lock()
			s.ended, s.token = revoked, ""
			l.mu.Unlock()
			return "", errors.New(revoked)
		}
	}
	return user, nil
}

// end ends a session (logout).
func (l *logins) end(id string) {
	l.mu.Lock()
	delete(l.sessions, hash(id))
	l.mu.Unlock()
}

// setCookie sets the session cookie: HttpOnly so that no script can read
// it, SameSite=Strict so that no other site's page sends it, Secure when
// the server is reached over TLS.
func setCookie(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: isTLS(r), MaxAge: int(sessionIdle.Seconds())})
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: isTLS(r), MaxAge: -1})
}

func isTLS(r *http.Request) bool { return r.TLS != nil }
