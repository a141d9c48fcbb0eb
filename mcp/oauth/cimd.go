package oauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warrenhq/warren/sessions/bound"
)

// FetchOptions configure fetching client ID metadata documents.
type FetchOptions struct {
	// AllowLoopback lets a document be fetched from a loopback address.
	// Tests only: a server on the internet must never fetch its own
	// loopback services on a client's say-so.
	AllowLoopback bool
	// RootCAs, when set, replaces the system's roots (tests: the test
	// server's certificate).
	RootCAs *x509.CertPool
}

// Bounds of a metadata document fetch.
const (
	fetchTimeout = 5 * time.Second
	maxDocument  = 16 << 10
	minCache     = time.Minute
	defaultCache = time.Hour
	maxCache     = 24 * time.Hour
)

// fetcher fetches client ID metadata documents: https only, no redirects,
// no proxy, bounded in time and size, and never from an address that is
// not public (loopback, private, link-local, …), checked on the address
// actually dialed so that DNS cannot point the fetch inside.
type fetcher struct {
	client        *http.Client
	allowLoopback bool
}

func newFetcher(o FetchOptions) *fetcher {
	f := &fetcher{allowLoopback: o.AllowLoopback}
	dialer := &net.Dialer{Timeout: fetchTimeout, Control: func(_, address string, _ syscall.RawConn) error {
		return f.checkAddr(address)
	}}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    fetchTimeout,
		ResponseHeaderTimeout:  fetchTimeout,
		MaxResponseHeaderBytes: 16 << 10,
		DisableCompression:     true,
		MaxIdleConns:           4,
		IdleConnTimeout:        30 * time.Second,
	}
	f.client = &http.Client{Transport: tr, Timeout: fetchTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return f
}

// errPrivate refuses an address that is not on the public internet.
var errPrivate = errors.New("its host is not a public internet address")

func (f *fetcher) checkAddr(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, errPrivate)
	}
	if !f.publicIP(ap.Addr()) {
		return errPrivate
	}
	return nil
}

// cgnat is the shared address space of carrier-grade NAT (RFC 6598).
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

func (f *fetcher) publicIP(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() {
		return f.allowLoopback
	}
	return a.IsGlobalUnicast() && !a.IsPrivate() && !cgnat.Contains(a) && !a.IsLinkLocalUnicast()
}

func isLoopbackIP(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Unmap().IsLoopback()
}

// checkDocumentURL applies the rules of a client ID that is a URL: https,
// a path, no fragment, credentials or dot segments.
func checkDocumentURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" ||
		u.Path == "" || u.Path == "/" || strings.Contains("/"+u.Path+"/", "/./") || strings.Contains("/"+u.Path+"/", "/../") {
		return nil, &errInvalid{"invalid_client", "a client_id that is a URL must be https with a path, without fragment, credentials or dot segments"}
	}
	return u, nil
}

// fetchClient fetches, checks and caches the metadata document at id.
func (s *Server) fetchClient(ctx context.Context, id string) (*Client, error) {
	u, err := checkDocumentURL(id)
	if err != nil {
		return nil, err
	}
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && !s.fetcher.publicIP(a) {
		return nil, s.refuseDocument(id, errPrivate)
	}
	c, ttl, err := s.fetcher.fetch(ctx, id)
	if err != nil {
		return nil, s.refuseDocument(id, err)
	}
	// A document is cached only while there is room: anyone can name any
	// URL, and the table must not grow with them. Without the cache the
	// document is fetched again at the token endpoint.
	full, err := s.clientsFull(ctx)
	if err != nil {
		return nil, err
	}
	if full {
		var cached int
		_ = s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM oauth_clients WHERE id = ?`, id).Scan(&cached)
		if cached == 0 {
			s.opts.Log.Warn().Int("max_clients", s.opts.MaxClients).Msg("oauth: client table full; a metadata document is used without caching it")
			return c, nil
		}
	}
	meta, _ := json.Marshal(c)
	now := s.opts.Now()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO oauth_clients (id, kind, metadata, created_at, expires_at) VALUES (?, 'cimd', ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET metadata = excluded.metadata, expires_at = excluded.expires_at`,
		id, string(meta), now.UnixMilli(), now.Add(ttl).UnixMilli()); err != nil {
		return nil, fmt.Errorf("cache client metadata: %w", err)
	}
	return c, nil
}

func (s *Server) refuseDocument(id string, err error) error {
	s.opts.Log.Info().Str("client_id", bound.String(id, bound.Reason)).Err(err).Msg("oauth: client ID metadata document refused")
	var inv *errInvalid
	if errors.As(err, &inv) {
		return inv
	}
	return &errInvalid{"invalid_client", fmt.Sprintf("could not use the client ID metadata document at %s: %s",
		bound.String(id, bound.Reason), bound.String(err.Error(), bound.Reason))}
}

type document struct {
	Client
	ClientSecret  string   `json:"client_secret"`
	GrantTypes    []string `json:"grant_types"`
	ResponseTypes []string `json:"response_types"`
}

func (f *fetcher) fetch(ctx context.Context, id string) (*Client, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is named by the caller
		}
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("it answered %s (redirects are not followed)", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read it: %w", err)
	}
	if len(body) > maxDocument {
		return nil, 0, fmt.Errorf("it is larger than %d bytes", maxDocument)
	}
	var doc document
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, 0, errors.New("it is not a JSON object of client metadata")
	}
	c := doc.Client
	if c.ID != id {
		return nil, 0, errors.New("its client_id is not the URL it was fetched from")
	}
	if doc.ClientSecret != "" {
		return nil, 0, errors.New("it carries a client_secret: a metadata document describes a public client")
	}
	if c.AuthMethod == "" {
		c.AuthMethod = "none"
	}
	if c.AuthMethod != "none" {
		return nil, 0, fmt.Errorf("token_endpoint_auth_method %q is not supported for metadata documents: use none", bound.String(c.AuthMethod, bound.Name))
	}
	if err := checkMetadata(&c, doc.GrantTypes, doc.ResponseTypes); err != nil {
		return nil, 0, err
	}
	c.Kind = "cimd"
	return &c, cacheFor(resp.Header.Get("Cache-Control")), nil
}

// cacheFor is how long to keep a document: its max-age, within bounds.
func cacheFor(cc string) time.Duration {
	ttl := defaultCache
	for _, d := range strings.Split(cc, ",") {
		d = strings.TrimSpace(strings.ToLower(d))
		if d == "no-store" || d == "no-cache" {
			ttl = minCache
		}
		if v, ok := strings.CutPrefix(d, "max-age="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				ttl = time.Duration(n) * time.Second
			}
		}
	}
	return min(max(ttl, minCache), maxCache)
}
