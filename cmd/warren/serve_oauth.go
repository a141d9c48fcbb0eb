package main

import (
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/mcp/oauth"
	"github.com/warrenhq/warren/web"
)

// oauthFlags configure warren as an OAuth authorization server for remote
// MCP clients (docs/remote-clients.md). The client secret is read from
// the environment too, so that it need not appear in a process list.
func oauthFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "public-url", EnvVars: []string{"WARREN_PUBLIC_URL"},
			Usage: "warren's external https origin behind a reverse proxy (e.g. https://warren.example.com); turns on OAuth for remote MCP clients (docs/remote-clients.md)"},
		&cli.StringFlag{Name: "oidc-issuer", EnvVars: []string{"WARREN_OIDC_ISSUER"},
			Usage: "OpenID Connect provider people sign in at (Google: https://accounts.google.com); without it, a single-user server signs in with the web console"},
		&cli.StringFlag{Name: "oidc-client-id", EnvVars: []string{"WARREN_OIDC_CLIENT_ID"}, Usage: "warren's client id at the OpenID Connect provider"},
		&cli.StringFlag{Name: "oidc-client-secret", EnvVars: []string{"WARREN_OIDC_CLIENT_SECRET"},
			Usage: "warren's client secret at the provider (prefer the environment variable: a flag shows in the process list)"},
		&cli.StringFlag{Name: "oidc-claim", Value: "email", EnvVars: []string{"WARREN_OIDC_CLAIM"}, Usage: "ID token claim that names the warren user"},
		&cli.StringSliceFlag{Name: "oidc-allow", EnvVars: []string{"WARREN_OIDC_ALLOW"},
			Usage: "who may sign in: a user (alice@example.com) or a domain (@example.com); repeatable; required with --oidc-issuer"},
		&cli.DurationFlag{Name: "oauth-access-ttl", Value: oauth.DefaultAccessTTL, Usage: "how long an OAuth access token works before the client refreshes it"},
		// Tests only: lets warren fetch client ID metadata documents from
		// the test's TLS server on loopback, which a real server must
		// never do on a client's say-so.
		&cli.StringFlag{Name: "oauth-test-fetch-ca", Hidden: true, Usage: "tests only: trust this PEM CA and allow loopback for client ID metadata documents"},
	}
}

// openOAuth returns the authorization server --public-url asks for, or
// nil without it.
func openOAuth(c *cli.Context, svc *services, authMode string, console *web.Console) (*oauth.Server, error) {
	public := c.String("public-url")
	if public == "" {
		for _, f := range []string{"oidc-issuer", "oidc-client-id", "oidc-allow"} {
			if c.IsSet(f) {
				return nil, cli.Exit(fmt.Sprintf("--%s needs --public-url: OAuth is served at warren's external https URL", f), 2)
			}
		}
		return nil, nil
	}
	if authMode != "token" {
		return nil, cli.Exit("--public-url (OAuth) needs --auth token", 2)
	}
	if c.Duration("oauth-access-ttl") < 5*time.Second || c.Duration("oauth-access-ttl") > 24*time.Hour {
		return nil, cli.Exit("--oauth-access-ttl must be between 5s and 24h", 2)
	}
	opts := oauth.Options{PublicURL: public, Log: svc.log, AccessTTL: c.Duration("oauth-access-ttl")}
	if f := c.String("oauth-test-fetch-ca"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		opts.Fetch.RootCAs = x509.NewCertPool()
		if !opts.Fetch.RootCAs.AppendCertsFromPEM(pem) {
			return nil, cli.Exit("--oauth-test-fetch-ca: no PEM certificate in "+f, 2)
		}
		opts.Fetch.AllowLoopback = true
		svc.log.Warn().Msg("--oauth-test-fetch-ca: client ID metadata documents may be fetched from loopback (tests only)")
	}
	if c.String("oidc-issuer") != "" {
		opts.Upstream = &oauth.UpstreamConfig{Issuer: c.String("oidc-issuer"), ClientID: c.String("oidc-client-id"),
			ClientSecret: c.String("oidc-client-secret"), Claim: c.String("oidc-claim"), Allow: c.StringSlice("oidc-allow")}
	} else {
		opts.Console = console
	}
	s, err := oauth.New(c.Context, svc.db, opts)
	if err != nil {
		if strings.HasPrefix(err.Error(), "--") {
			return nil, cli.Exit(err.Error(), 2)
		}
		return nil, err
	}
	return s, nil
}

// printOAuth tells the operator how remote clients connect.
func printOAuth(w io.Writer, s *oauth.Server, upstream string) {
	login := "people sign in at " + upstream
	if upstream == "" {
		login = "approving needs this browser signed in to the web console (the link above)"
	}
	fmt.Fprintf(w, "OAuth: remote MCP clients (Claude custom connectors, VS Code, Cursor) add %s; %s.\n", s.Resource(), login)
}
