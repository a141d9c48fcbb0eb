package gitpush

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/warrenhq/warren/sessions/bound"
	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/identity"
)

// forge is where a remote's pull requests are opened.
type forge struct {
	kind string // github, gitea, gitlab
	api  string // the API base URL, no trailing slash
	repo string // owner/name
}

// repoPath is org/name of a remote, without .git.
func repoPath(r identity.Remote) string {
	return strings.TrimSuffix(strings.Trim(r.Endpoint.Path, "/"), ".git")
}

// forgeOf finds the forge of remote r for identity id: the identity's
// forge URL (its path says which API: /api/v4 GitLab, /api/v1 Gitea, else
// GitHub's), else github.com's or gitlab.com's public API.
func forgeOf(r identity.Remote, id identity.Identity) (forge, error) {
	f := forge{repo: repoPath(r)}
	host := strings.ToLower(r.Endpoint.Host)
	switch {
	case id.ForgeURL != "":
		f.api = strings.TrimRight(id.ForgeURL, "/")
		switch {
		case strings.HasSuffix(f.api, "/api/v4"):
			f.kind = "gitlab"
		case strings.HasSuffix(f.api, "/api/v1"):
			f.kind = "gitea"
		default:
			f.kind = "github"
		}
	case host == "github.com":
		f.kind, f.api = "github", "https://api.github.com"
	case host == "gitlab.com":
		f.kind, f.api = "gitlab", "https://gitlab.com/api/v4"
	default:
		return forge{}, invalidf("warren does not know the forge of %s: give identity %s a forge URL "+
			"(warren identity create --forge-url, e.g. https://gitea.example/api/v1)", host, id.Name)
	}
	return f, nil
}

// webURL is the branch's web page on a forge warren knows, else "".
func webURL(r identity.Remote, id identity.Identity, branch string) string {
	host := strings.ToLower(r.Endpoint.Host)
	base := ""
	switch {
	case host == "github.com" || host == "gitlab.com":
		base = "https://" + host
	case id.ForgeURL != "":
		u, err := url.Parse(id.ForgeURL)
		if err != nil {
			return ""
		}
		if u.Host == "api.github.com" {
			u.Host = "github.com"
		}
		base = u.Scheme + "://" + u.Host
	default:
		return ""
	}
	sep := "/tree/"
	switch api := strings.TrimRight(id.ForgeURL, "/"); {
	case host == "gitlab.com" || strings.HasSuffix(api, "/api/v4"):
		sep = "/-/tree/"
	case strings.HasSuffix(api, "/api/v1"):
		sep = "/src/branch/" // Gitea
	}
	return base + "/" + repoPath(r) + sep + branch
}

// openPR opens a pull (merge) request from res.Branch and returns its URL.
func (s *Service) openPR(ctx context.Context, owner string, o Options, res Result) (string, error) {
	id, err := s.identityOf(ctx, owner, o.SessionID, o.Identity)
	if err != nil {
		return "", err
	}
	sess, err := s.Sessions.Get(ctx, owner, o.SessionID)
	if err != nil {
		return "", err
	}
	r, err := identity.ParseRemote(sess.Source)
	if err != nil {
		return "", err
	}
	f, err := forgeOf(r, id)
	if err != nil {
		return "", err
	}
	sec, err := s.Identities.Open(ctx, id)
	if err != nil {
		return "", err
	}
	if sec.Token == "" {
		return "", invalidf("identity %s has no token: a pull request is opened through the forge's API with one", id.Name)
	}
	base := o.PullRequest.Base
	if base == "" {
		base = res.cloned
	}
	if base == "" {
		base = "main"
	}
	hc := s.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: time.Minute}
	}
	return createPR(ctx, hc, f, sec.Token, res.Branch, base, *o.PullRequest)
}

// createPR asks forge f for a pull (merge) request from head into base and
// returns its web page.
func createPR(ctx context.Context, hc *http.Client, f forge, token, head, base string, pr PullRequest) (string, error) {
	var path string
	var body any
	switch f.kind {
	case "gitlab":
		path = "/projects/" + url.PathEscape(f.repo) + "/merge_requests"
		body = map[string]string{"source_branch": head, "target_branch": base, "title": pr.Title, "description": pr.Body}
	default:
		path = "/repos/" + f.repo + "/pulls"
		body = map[string]string{"head": head, "base": base, "title": pr.Title, "body": pr.Body}
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.api+path, bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	switch f.kind {
	case "gitlab":
		req.Header.Set("PRIVATE-TOKEN", token)
	case "gitea":
		req.Header.Set("Authorization", "token "+token)
	default:
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", errs.New(errs.Unavailable, fmt.Sprintf("%s API at %s: %v", f.kind, f.api, redactErr(err, token)))
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct {
		HTMLURL string `json:"html_url"`
		WebURL  string `json:"web_url"`
		Message any    `json:"message"`
	}
	_ = json.Unmarshal(data, &out)
	if resp.StatusCode/100 != 2 {
		msg := fmt.Sprint(out.Message)
		if out.Message == nil {
			msg = string(data)
		}
		return "", errs.New(errs.Invalid, fmt.Sprintf("%s API answered %s: %s", f.kind, resp.Status,
			bound.String(strings.ReplaceAll(msg, token, "[token]"), 512)))
	}
	for _, u := range []string{out.HTMLURL, out.WebURL} {
		if p, err := url.Parse(u); err == nil && (p.Scheme == "https" || p.Scheme == "http") && len(u) <= 2048 {
			return u, nil
		}
	}
	return "", errs.New(errs.Internal, fmt.Sprintf("%s API made the pull request but gave no URL for it", f.kind))
}

func redactErr(err error, token string) string {
	return strings.ReplaceAll(err.Error(), token, "[token]")
}
