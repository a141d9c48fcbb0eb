// Package web serves warren's console: a single-page app built from the
// TypeScript sources in web/src by esbuild into web/dist, which is
// committed and embedded so that 'go install' needs no Node. The page talks
// to the server only through MCP at /mcp. This package adds what MCP
// cannot do: the pages themselves and the login, Jupyter-style: a one-time
// code in the fragment of a printed link (the fragment never reaches a
// server log), or a pasted token, is traded for a console session: an
// HttpOnly, SameSite=Strict cookie and, in the answer's body, a console key
// that the page keeps in its origin's storage and sends in a header
// (KeyHeader). /mcp accepts the cookie only with its key and only from the
// console's own origin: the cookie reaches every port of the host, the key
// no other origin.
package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/warrenhq/warren/mcp"
)

// Options configure a Console.
type Options struct {
	// Tokens checks pasted tokens and the token of each console session;
	// nil: the server runs without authentication (--auth none) and the
	// console needs no login.
	Tokens Tokens
	// AllowedOrigins are the extra browser origins the server allows
	// (--allow-origin); the console accepts its cookie from those too when
	// the server is reached under that name.
	AllowedOrigins []string
	// Dir, when set, serves the console's files from this directory
	// instead of the embedded build (development: 'just web-watch').
	Dir string
	// Log receives what the operator should know; never a secret.
	Log zerolog.Logger
}

// Console is the web console's HTTP side.
type Console struct {
	opts   Options
	files  *files
	logins *logins
}

// New returns the console.
func New(opts Options) (*Console, error) {
	var src fs.FS
	if opts.Dir != "" {
		src = osDir(opts.Dir)
	} else {
		sub, err := fs.Sub(dist, "dist")
		if err != nil {
			return nil, fmt.Errorf("console assets: %w", err)
		}
		src = sub
	}
	f, err := newFiles(src, opts.Dir != "")
	if err != nil {
		return nil, err
	}
	return &Console{opts: opts, files: f, logins: newLogins(opts.Tokens)}, nil
}

// LoginURL returns the console's address under base (scheme://host:port)
// with a new one-time login code for user in its fragment. Print it to the
// person who runs the server; never log it.
func (c *Console) LoginURL(base, user string) string {
	if c.opts.Tokens == nil {
		return base + "/"
	}
	return base + "/#code=" + c.logins.newCode(user)
}

// Paths of the login endpoints.
const (
	LoginPath  = "/console/login"
	LogoutPath = "/console/logout"
)

// ServeHTTP serves the console's files and its login endpoints.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	switch r.URL.Path {
	case LoginPath:
		c.login(w, r)
	case LogoutPath:
		c.logout(w, r)
	default:
		c.files.serve(w, r)
	}
}

// securityHeaders: scripts, styles, images and connections from this
// origin only, no inline script, no framing, no referrer.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// maxLoginBody bounds a login request.
const maxLoginBody = 4 << 10

type loginRequest struct {
	Code  string `json:"code"`
	Token string `json:"token"`
}

// accept checks what signing in and out both require: a POST from the
// console's own page to a server that has tokens. It answers the refusal
// and returns false otherwise; what names the action in the answer.
func (c *Console) accept(w http.ResponseWriter, r *http.Request, what, noAuth string) bool {
	switch {
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", "POST")
		jsonError(w, http.StatusMethodNotAllowed, what+" with POST")
	case !c.ownOrigin(r):
		jsonError(w, http.StatusForbidden, what+" from the console's own page")
	case c.opts.Tokens == nil:
		jsonError(w, http.StatusConflict, "this server runs without authentication (--auth none): "+noAuth)
	default:
		return true
	}
	return false
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.accept(w, r, "sign in", "no sign-in is needed") {
		return
	}
	err := c.logins.attempt(clientAddr(r))
	if err != nil {
		c.refuse(w, r, err, false)
		return
	}
	var req loginRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxLoginBody)).Decode(&req); err != nil {
		jsonError(w, http.StatusBadRequest, "send JSON {\"code\": ...} or {\"token\": ...}")
		return
	}
	var id, key string
	switch {
	case req.Code != "":
		id, key, err = c.logins.trade(req.Code)
	case strings.TrimSpace(req.Token) != "":
		id, key, err = c.logins.tokenLogin(r.Context(), strings.TrimSpace(req.Token))
	default:
		err = fmt.Errorf("paste a token, or open the console link the server printed")
	}
	if err != nil {
		c.refuse(w, r, err, req.Code != "")
		return
	}
	setCookie(w, r, id)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(loginAnswer{Key: key})
}

// loginAnswer is the body of a successful sign-in: the console key, which
// the page keeps in its origin's storage and sends as KeyHeader. It is
// never put in a URL or a cookie, and no request gets it but a sign-in
// with a code or a token.
type loginAnswer struct {
	Key string `json:"key"`
}

// refuse answers a refused sign-in: 429 with Retry-After over a limit, 503
// when the console is full, 401 otherwise. Refusals by the limit are not
// logged one by one (a flood would fill the log); the others are, and the
// limit bounds how often.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, err error, withCode bool) {
	var many *tooMany
	if errors.As(err, &many) {
		w.Header().Set("Retry-After", strconv.Itoa(many.seconds()))
		jsonError(w, http.StatusTooManyRequests, err.Error())
		return
	}
	status := http.StatusUnauthorized
	if errors.Is(err, errFull) {
		status = http.StatusServiceUnavailable
	}
	c.opts.Log.Info().Str("remote", r.RemoteAddr).Bool("with_code", withCode).Int("status", status).Msg("console sign-in refused")
	jsonError(w, status, err.Error())
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if !c.accept(w, r, "sign out", "there is no session to end") {
		return
	}
	clearCookie(w, r)
	if ck, err := r.Cookie(CookieName); err == nil {
		if err := c.logins.end(ck.Value, r.Header.Get(KeyHeader)); err != nil {
			jsonError(w, http.StatusUnauthorized, err.Error())
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// MCP wraps the MCP endpoint: a request with a bearer token (agents) goes
// to bearer as before; one with the console's cookie or key and no token
// goes to open with the session's user, but only when it carries both the
// cookie and its session's key, and comes from the console's own origin.
// Another page on the same machine (a "same site" under the cookie rules,
// whatever its port) receives the cookie but never the key, and a service
// that replays the cookie from its own server with a forged Origin gets
// 401.
func (c *Console) MCP(bearer, open http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(CookieName)
		key := r.Header.Get(KeyHeader)
		if c.opts.Tokens == nil || r.Header.Get("Authorization") != "" || (err != nil && key == "") {
			bearer.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet && r.Header.Get("Origin") == "" {
			// Browsers send no Origin with a same-origin GET: the SDK's
			// optional server stream, which warren does not serve.
			w.Header().Set("Allow", "POST, DELETE")
			http.Error(w, "GET streams are not served: the console reads each response's own stream", http.StatusMethodNotAllowed)
			return
		}
		if !c.ownOrigin(r) {
			http.Error(w, "the console's cookie is accepted only from the console's own page: agents send 'Authorization: Bearer <token>'",
				http.StatusForbidden)
			return
		}
		if ck == nil { // the key without its cookie: the browser dropped it
			w.Header().Set("WWW-Authenticate", `Bearer realm="warren"`)
			http.Error(w, ErrLoggedOut.Error(), http.StatusUnauthorized)
			return
		}
		user, firstWrong, err := c.logins.user(r.Context(), ck.Value, key)
		if firstWrong {
			c.opts.Log.Warn().Str("remote", r.RemoteAddr).Bool("with_key", key != "").
				Msg("refused a request with a console session's cookie but not its key: another local service may have received the cookie")
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="warren"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		open.ServeHTTP(w, r.WithContext(mcp.WithUser(r.Context(), user)))
	})
}

// ConsoleUser returns the user of r's console session, proved by its
// console key: the OAuth consent page (package mcp/oauth) signs in with
// the console on a single-user server, its form carrying the key that its
// script copies from the console's storage, the browser the cookie.
func (c *Console) ConsoleUser(r *http.Request, key string) (string, error) {
	if c.opts.Tokens == nil {
		return "", errors.New("this server runs without authentication")
	}
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return "", ErrLoggedOut
	}
	user, _, err := c.logins.user(r.Context(), ck.Value, key)
	return user, err
}

// ownOrigin reports whether r comes from the console's own page: its
// Origin is this server's scheme and Host, and that Host is loopback or
// an allowed origin (so that a DNS-rebound name does not count).
func (c *Console) ownOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	scheme := "http"
	if isTLS(r) {
		scheme = "https"
	}
	if origin == "" || origin != scheme+"://"+r.Host {
		return false
	}
	if slices.Contains(c.opts.AllowedOrigins, origin) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && mcp.IsLoopbackHost(u.Hostname())
}

func jsonError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
