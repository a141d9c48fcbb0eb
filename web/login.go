package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// CookieName is the console's session cookie.
const CookieName = "warren_console"

// KeyHeader carries the console key: the second secret of a console
// session, which the page holds in its origin's storage and sends with
// every request. Browsers send a cookie of 127.0.0.1 to every port of
// 127.0.0.1, so any other local web service the person visits receives the
// cookie; the key it never receives (it is only ever in the body of the
// sign-in answer and in storage that is the origin's, port included), so
// the cookie alone opens nothing.
const KeyHeader = "Warren-Console-Key"

// Lifetimes of the login secrets.
const (
	// codeTTL bounds how long a printed console link can be used.
	codeTTL = 24 * time.Hour
	// sessionIdle ends a console session unused for this long.
	sessionIdle = 12 * time.Hour
	// maxSessions bounds the console sessions kept. When it is reached,
	// new sign-ins are refused until some end: a sign-in never ends
	// another user's session.
	maxSessions = 1000
	// maxUserSessions bounds one user's live sign-ins; the user's own
	// least recently used one is ended to make room.
	maxUserSessions = 10
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
	token    string   // "" for a session opened with a login code
	key      [32]byte // SHA-256 of the console key (KeyHeader)
	lastUsed time.Time
	// warned: a request with this cookie and a wrong key was logged.
	warned bool
	// ended says why the session ended while its cookie lives on (its
	// token was revoked): every later request gets the same reason.
	ended string
}

// ErrLoggedOut is returned for a cookie whose session has ended (logged
// out, expired, server restarted, token revoked).
var ErrLoggedOut = errors.New("the console session has ended: sign in again")

// errWrongKey is returned for a cookie that comes without its session's
// console key: replayed by another local service that received the
// cookie, or a page that lost its storage.
var errWrongKey = errors.New("this request carries the console's cookie but not its key (" + KeyHeader +
	"): sign in again on the console's page; agents send 'Authorization: Bearer <token>'")

// errFull refuses a sign-in when maxSessions are live.
var errFull = fmt.Errorf("the console has %d live sign-ins, as many as it keeps: sign out where you no longer need it, "+
	"or wait until unused ones end (after %s)", maxSessions, sessionIdle)

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
	// addrs limits sign-in attempts per address, users successful
	// sign-ins per user.
	addrs, users *limiter
	// maxSessions and maxUserSessions, as fields so that tests can
	// reach them with a few sign-ins.
	maxSessions, maxUserSessions int
}

func newLogins(tokens Tokens) *logins {
	return &logins{tokens: tokens, now: time.Now, codes: map[string]loginCode{}, sessions: map[string]*consoleSession{},
		addrs: newLimiter(addrBurst, addrEvery), users: newLimiter(userBurst, userEvery),
		maxSessions: maxSessions, maxUserSessions: maxUserSessions}
}

// attempt counts a sign-in attempt from addr, or refuses it when addr made
// too many lately.
func (l *logins) attempt(addr string) error {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if wait := l.addrs.wait(addr, now); wait > 0 {
		return &tooMany{what: "sign-in attempts from this address", retry: wait}
	}
	l.addrs.take(addr, now)
	return nil
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

// errUsedCode refuses a code that was used, expired or never made.
var errUsedCode = errors.New("this console link was already used or has expired: ask whoever runs the server for a new one (it is printed when 'warren serve http' starts), or sign in with a token")

// trade exchanges a code, once, for a new session id and its console key.
// A code refused by a limit stays usable.
func (l *logins) trade(code string) (id, key string, err error) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.codes[hash(code)]
	if !ok || now.After(c.expires) {
		delete(l.codes, hash(code))
		return "", "", errUsedCode
	}
	id, key, err = l.openLocked(c.user, "", now)
	if err == nil {
		delete(l.codes, hash(code)) // once
	}
	return id, key, err
}

// tokenLogin opens a session for the user of a pasted token.
func (l *logins) tokenLogin(ctx context.Context, token string) (id, key string, err error) {
	if l.tokens == nil {
		return "", "", errors.New("this server does not use tokens")
	}
	user, err := l.tokens.Authenticate(ctx, token)
	if err != nil {
		return "", "", errors.New("that token is not valid (unknown or revoked): make one with 'warren token create --user NAME'")
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.openLocked(user, token, now)
}

// openLocked opens a session for user: within the user's rate of sign-ins,
// ending the user's own least recently used session when the user has
// maxUserSessions, and refusing when maxSessions are live. It never ends
// another user's session.
func (l *logins) openLocked(user, token string, now time.Time) (id, key string, err error) {
	if wait := l.users.wait(user, now); wait > 0 {
		return "", "", &tooMany{what: "sign-ins as " + user, retry: wait}
	}
	var mine []string
	for k, s := range l.sessions {
		if s.user == user {
			mine = append(mine, k)
		}
	}
	if len(mine) >= l.maxUserSessions {
		oldest := mine[0]
		for _, k := range mine[1:] {
			if l.sessions[k].lastUsed.Before(l.sessions[oldest].lastUsed) {
				oldest = k
			}
		}
		delete(l.sessions, oldest)
	} else if len(l.sessions) >= l.maxSessions {
		l.sweepLocked(now)
		if len(l.sessions) >= l.maxSessions {
			return "", "", errFull
		}
	}
	l.users.take(user, now)
	id, key = secret(), secret()
	l.sessions[hash(id)] = &consoleSession{user: user, token: token, key: sha256.Sum256([]byte(key)), lastUsed: now}
	return id, key, nil
}

// sweepLocked drops the sessions that ended: unused for sessionIdle, or
// whose token was revoked.
func (l *logins) sweepLocked(now time.Time) {
	for k, s := range l.sessions {
		if s.ended != "" || now.Sub(s.lastUsed) > sessionIdle {
			delete(l.sessions, k)
		}
	}
}

// user returns the user of a session id presented with its console key,
// checking its token again. A wrong key changes nothing in the session:
// whoever replays a cookie can neither use it nor keep it alive. firstWrong
// is true the first time a session sees a wrong key (worth a log line).
func (l *logins) user(ctx context.Context, id, key string) (user string, firstWrong bool, err error) {
	k := hash(id)
	sum := sha256.Sum256([]byte(key))
	now := l.now()
	l.mu.Lock()
	s, ok := l.sessions[k]
	if ok && now.Sub(s.lastUsed) > sessionIdle {
		delete(l.sessions, k)
		ok = false
	}
	if ok && subtle.ConstantTimeCompare(sum[:], s.key[:]) != 1 {
		firstWrong = !s.warned
		s.warned = true
		l.mu.Unlock()
		return "", firstWrong, errWrongKey
	}
	var token, ended string
	if ok {
		s.lastUsed = now
		user, token, ended = s.user, s.token, s.ended
	}
	l.mu.Unlock()
	if !ok {
		return "", false, ErrLoggedOut
	}
	if ended != "" {
		return "", false, errors.New(ended)
	}
	if token != "" {
		if _, err := l.tokens.Authenticate(ctx, token); err != nil {
			const revoked = "the token this console signed in with was revoked: sign in again"
			l.mu.Lock()
			s.ended, s.token = revoked, ""
			l.mu.Unlock()
			return "", false, errors.New(revoked)
		}
	}
	return user, false, nil
}

// end ends a session (sign-out), which takes its console key: a replayed
// cookie cannot sign a person out. A session already gone is no error.
func (l *logins) end(id, key string) error {
	k := hash(id)
	sum := sha256.Sum256([]byte(key))
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.sessions[k]
	if !ok {
		return nil
	}
	if subtle.ConstantTimeCompare(sum[:], s.key[:]) != 1 {
		return errWrongKey
	}
	delete(l.sessions, k)
	return nil
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
