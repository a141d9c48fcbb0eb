package oauth_test

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/warrenhq/warren/mcp/oauth"
)

// docServer serves client ID metadata documents over TLS on loopback and
// counts the requests it gets.
type docServer struct {
	*httptest.Server
	hits atomic.Int32
}

func newDocServer(t *testing.T) *docServer {
	d := &docServer{}
	d.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.hits.Add(1)
		self := d.URL + r.URL.Path
		switch r.URL.Path {
		case "/client.json":
			w.Header().Set("Cache-Control", "max-age=3600")
			_ = json.NewEncoder(w).Encode(map[string]any{"client_id": self, "client_name": "Doc Agent",
				"redirect_uris": []string{"http://127.0.0.1:9/cb"}, "token_endpoint_auth_method": "none"})
		case "/other-id.json":
			_ = json.NewEncoder(w).Encode(map[string]any{"client_id": d.URL + "/client.json", "redirect_uris": []string{"http://127.0.0.1:9/cb"}})
		case "/huge.json":
			_, _ = w.Write([]byte(`{"client_id":"` + self + `","client_name":"` + strings.Repeat("x", 20000) + `","redirect_uris":["http://127.0.0.1:9/cb"]}`))
		case "/any/1.json", "/any/2.json", "/any/3.json", "/any/4.json", "/any/5.json":
			_ = json.NewEncoder(w).Encode(map[string]any{"client_id": self, "client_name": "Any " + r.URL.Path,
				"redirect_uris": []string{"http://127.0.0.1:9/cb"}})
		case "/moved.json":
			http.Redirect(w, r, "/client.json", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *docServer) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(d.Certificate())
	return p
}

// A client ID metadata document on a loopback, private or link-local
// address is never fetched: warren, on a client's say-so, would
// otherwise reach services inside its own network. A name that resolves
// to such an address (localhost here) is refused at the dial, so DNS
// cannot point the fetch inside either.
func TestClientDocumentOnPrivateAddressNotFetched(t *testing.T) {
	d := newDocServer(t)
	w := newWarren(t, warrenOpts{fetch: oauth.FetchOptions{RootCAs: d.pool()}})
	_, challenge := pkce("j")
	port := d.Listener.Addr().(interface{ String() string }).String()
	port = port[strings.LastIndex(port, ":"):]
	for _, id := range []string{d.URL + "/client.json", "https://localhost" + port + "/client.json",
		"https://10.0.0.1/client.json", "https://169.254.169.254/latest/meta-data.json", "https://[::1]" + port + "/client.json"} {
		a := app{id: id, redirect: "http://127.0.0.1:9/cb"}
		status, loc, page := newBrowser(t, a.redirect).get(a.authorizeURL(w, challenge, "s"))
		if status != http.StatusBadRequest || loc != "" || !strings.Contains(page, "not a public internet address") {
			t.Errorf("client_id %s: %d %q %s", id, status, loc, page)
		}
	}
	if n := d.hits.Load(); n != 0 {
		t.Fatalf("the document server on loopback got %d requests, want 0", n)
	}
}

// Where fetching is allowed (a test-only option lets the test's loopback
// server stand in for a public one), a client known by its document
// signs in like a registered one; its document is cached; documents that
// lie about their id, are too large or redirect are refused.
func TestClientDocumentFetchedCheckedAndCached(t *testing.T) {
	d := newDocServer(t)
	w := newWarren(t, warrenOpts{fetch: oauth.FetchOptions{RootCAs: d.pool(), AllowLoopback: true}})
	a := app{id: d.URL + "/client.json", redirect: "http://127.0.0.1:9/cb"}
	verifier, challenge := pkce("k")
	host := strings.TrimPrefix(d.URL, "https://")
	b := newBrowser(t, a.redirect)
	status, _, page := b.get(a.authorizeURL(w, challenge, "s"))
	if status != http.StatusOK || !strings.Contains(page, "Doc Agent") || !strings.Contains(page, host) || strings.Contains(page, "its own claim") {
		t.Fatalf("consent for a document client: %d %s", status, page)
	}
	q := w.approve(b, a, challenge, "s2")
	if status, tok := w.redeem(a, q.Get("code"), verifier); status != http.StatusOK {
		t.Fatalf("redeem as a document client: %d %v", status, tok)
	}
	if n := d.hits.Load(); n != 1 {
		t.Fatalf("the document was fetched %d times for two authorizations and a token, want 1 (cached)", n)
	}
	for path, want := range map[string]string{"/other-id.json": "client_id is not the URL", "/huge.json": "larger than",
		"/moved.json": "redirects are not followed", "/missing.json": "404"} {
		bad := app{id: d.URL + path, redirect: a.redirect}
		status, loc, page := newBrowser(t, a.redirect).get(bad.authorizeURL(w, challenge, "s"))
		if status != http.StatusBadRequest || loc != "" || !strings.Contains(page, want) {
			t.Errorf("%s: %d %q, want 400 saying %q: %s", path, status, loc, want, page)
		}
	}
	// A client_id URL that breaks the rules is not fetched at all.
	before := d.hits.Load()
	for _, id := range []string{strings.Replace(d.URL, "https", "http", 1) + "/client.json", d.URL + "/", d.URL + "/a/../client.json"} {
		bad := app{id: id, redirect: a.redirect}
		if status, _, _ := newBrowser(t, a.redirect).get(bad.authorizeURL(w, challenge, "s")); status != http.StatusBadRequest {
			t.Errorf("client_id %s: %d, want 400", id, status)
		}
	}
	if d.hits.Load() != before {
		t.Errorf("client_id URLs against the rules were fetched")
	}
	_ = url.Values{}
}

// Anyone may name any document URL, and anyone may register: together
// they never keep more than MaxClients rows. Past the limit a document
// still works (fetched again, not cached) and registration is refused with
// a clear error.
func TestClientsAreBounded(t *testing.T) {
	d := newDocServer(t)
	w := newWarren(t, warrenOpts{fetch: oauth.FetchOptions{RootCAs: d.pool(), AllowLoopback: true}, maxClients: 3})
	_, challenge := pkce("n")
	for i := 1; i <= 5; i++ {
		a := app{id: d.URL + "/any/" + string(rune('0'+i)) + ".json", redirect: "http://127.0.0.1:9/cb"}
		if status, _, page := newBrowser(t, a.redirect).get(a.authorizeURL(w, challenge, "s")); status != http.StatusOK {
			t.Fatalf("document client %d: %d %s", i, status, page)
		}
	}
	var n int
	if err := w.db.QueryRow(`SELECT COUNT(*) FROM oauth_clients`).Scan(&n); err != nil || n > 3 {
		t.Fatalf("%d clients kept (%v), want at most 3", n, err)
	}
	status, out := w.register(`{"client_name":"late","redirect_uris":["http://127.0.0.1:9/cb"],"token_endpoint_auth_method":"none"}`)
	if status != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(out["error_description"]), "at most 3 clients") {
		t.Fatalf("registration past the limit: %d %v", status, out)
	}
}
