package oauth

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
)

//go:embed assets/consent.css assets/consent.js
var assets embed.FS

// pageCSP is the pages' policy: scripts and styles of this origin only,
// no inline script, no framing; forms post here (and, once approved, are
// redirected to extra).
func pageCSP(extra string) string {
	action := "'self'"
	if extra != "" {
		action += " " + extra
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'none'; " +
		"base-uri 'none'; form-action " + action + "; frame-ancestors 'none'"
}

func pageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", pageCSP(""))
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer browsers send the
	// consent form's POST with "Origin: null", and the origin check
	// needs the real one. Other origins get no referrer.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

func serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	types := map[string]string{"consent.css": "text/css; charset=utf-8", "consent.js": "text/javascript; charset=utf-8"}
	ct, ok := types[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}

var pages = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Allow {{.Name}} to use warren?</title><link rel="stylesheet" href="/oauth/assets/consent.css"></head>
<body><main>
<h1>Allow <span class="mono">{{.Name}}</span> to use warren?</h1>
<dl>
<dt>Application</dt><dd>{{.Name}}{{if .Unverified}} <span class="warn">(its own claim: it registered itself, warren cannot verify the name)</span>{{end}}</dd>
<dt>Known by</dt><dd>{{if .DocumentHost}}its metadata document at <code>{{.DocumentHost}}</code>{{else}}dynamic registration, <code>{{.ClientID}}</code>{{end}}</dd>
{{if .ClientURI}}<dt>Web site</dt><dd><code>{{.ClientURI}}</code></dd>{{end}}
<dt>Sends you back to</dt><dd><code>{{.Redirect}}</code></dd>
<dt>As</dt><dd>{{if .User}}<strong>{{.User}}</strong>{{else}}the user signed in to warren's web console in this browser{{end}}</dd>
<dt>Gets</dt><dd>everything you can do with warren's MCP tools: create and delete sessions, run commands in their jails, read and write their files, until you revoke it or it stops refreshing for 30 days</dd>
</dl>
{{if .Console}}<p id="no-console" class="bad" hidden>This browser is not signed in to warren's web console: open the console link that 'warren serve http' printed (or sign in there with a token), then reload this page.</p>{{end}}
<form id="consent" method="post" action="/oauth/consent">
<input type="hidden" name="request" value="{{.Request}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
{{if .Console}}<input type="hidden" id="console-key" name="console_key" value="">{{end}}
<div class="buttons">
<button class="primary" type="submit" name="action" value="approve">Allow</button>
<button type="submit" name="action" value="deny">Deny</button>
</div>
</form>
</main>
{{if .Console}}<script src="/oauth/assets/consent.js"></script>{{end}}
</body></html>
{{define "error"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title><link rel="stylesheet" href="/oauth/assets/consent.css"></head>
<body><main><h1 class="bad">{{.Title}}</h1><p>{{.Text}}</p></main></body></html>
{{end}}`))

type consentData struct {
	Name, ClientID, DocumentHost, ClientURI, Redirect, User, Request, CSRF string
	Unverified, Console                                                    bool
}

func (s *Server) consentPage(w http.ResponseWriter, c *Client, id string, req authRequest) {
	d := consentData{Name: c.Name, ClientID: c.ID, ClientURI: c.URI, Redirect: req.RedirectURI, User: req.User,
		Request: id, CSRF: req.CSRF, Unverified: c.Kind == "dcr", Console: s.upstream == nil}
	if c.Kind == "cimd" {
		if u, err := url.Parse(c.ID); err == nil {
			d.DocumentHost = u.Host
		}
	}
	if d.Name == "" {
		d.Name = "an unnamed application"
	}
	pageHeaders(w.Header())
	// Browsers check the redirect after the form's POST against this
	// page's form-action: the client's redirect URI is allowed, no more.
	w.Header().Set("Content-Security-Policy", pageCSP(formTarget(req.RedirectURI)))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pages.Execute(w, d); err != nil {
		s.opts.Log.Error().Err(err).Msg("oauth: consent page")
	}
}

func (s *Server) errorPage(w http.ResponseWriter, status int, title, text string) {
	pageHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = pages.ExecuteTemplate(w, "error", map[string]string{"Title": title, "Text": text})
}

// Cookies.
const (
	bindingCookie = "warren_oauth_request"
	loginCookie   = "warren_oauth_login"
)

// cookieName gives cookies the __Host- prefix over https: the browser
// then keeps them to this host, path /, secure only.
func (s *Server) cookieName(base string) string {
	if strings.HasPrefix(s.issuer, "https://") {
		return "__Host-" + base
	}
	return base
}

func (s *Server) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(name), Value: value, Path: "/", HttpOnly: true,
		Secure: strings.HasPrefix(s.issuer, "https://"), SameSite: http.SameSiteLaxMode, MaxAge: maxAge})
}

// bindingCookie returns the browser's binding secret, setting one when
// the browser has none.
func (s *Server) bindingCookie(w http.ResponseWriter, r *http.Request) string {
	v := secret("")
	if ck, err := r.Cookie(s.cookieName(bindingCookie)); err == nil && len(ck.Value) == 43 {
		v = ck.Value // kept, so that requests started in other tabs stay good
	}
	s.setCookie(w, bindingCookie, v, int(requestTTL.Seconds())*6)
	return v
}
