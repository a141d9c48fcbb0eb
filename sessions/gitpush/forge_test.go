package gitpush

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/warrenhq/warren/sessions/errs"
	"github.com/warrenhq/warren/sessions/identity"
)

// Each forge gets its own request shape and token header, against a fake
// of its API (the real ones cannot be reached from where tests run).
func TestCreatePREachForge(t *testing.T) {
	for _, tc := range []struct {
		kind, path, header, value, answer string
		body                              map[string]string
	}{
		{"github", "/repos/org/repo/pulls", "Authorization", "Bearer tok", `{"html_url":"https://gh.example/org/repo/pull/1"}`,
			map[string]string{"head": "h", "base": "main", "title": "T", "body": "B"}},
		{"gitea", "/repos/org/repo/pulls", "Authorization", "token tok", `{"html_url":"https://gitea.example/org/repo/pulls/2"}`,
			map[string]string{"head": "h", "base": "main", "title": "T", "body": "B"}},
		{"gitlab", "/projects/org%2Frepo/merge_requests", "Private-Token", "tok", `{"web_url":"https://gl.example/org/repo/-/merge_requests/3"}`,
			map[string]string{"source_branch": "h", "target_branch": "main", "title": "T", "description": "B"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body map[string]string
				json.NewDecoder(r.Body).Decode(&body)
				if r.URL.EscapedPath() != tc.path || r.Header.Get(tc.header) != tc.value || len(body) != len(tc.body) {
					t.Errorf("%s %s %v %v", r.Method, r.URL.EscapedPath(), r.Header, body)
				}
				for k, v := range tc.body {
					if body[k] != v {
						t.Errorf("body %v, want %v", body, tc.body)
					}
				}
				w.WriteHeader(http.StatusCreated)
				w.Write([]byte(tc.answer))
			}))
			defer srv.Close()
			got, err := createPR(context.Background(), srv.Client(), forge{kind: tc.kind, api: srv.URL, repo: "org/repo"},
				"tok", "h", "main", PullRequest{Title: "T", Body: "B"})
			if err != nil || !strings.Contains(tc.answer, got) || got == "" {
				t.Fatalf("createPR: %q %v", got, err)
			}
		})
	}
}

// A refusal says what the forge said, without the token.
func TestCreatePRRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		w.Write([]byte(`{"message":"Validation Failed: token tok is not allowed"}`))
	}))
	defer srv.Close()
	_, err := createPR(context.Background(), srv.Client(), forge{kind: "github", api: srv.URL, repo: "o/r"}, "tok", "h", "main",
		PullRequest{Title: "T"})
	if errs.CodeOf(err) != errs.Invalid || !strings.Contains(err.Error(), "Validation Failed") || strings.Contains(err.Error(), "tok ") {
		t.Fatalf("refusal: %v", err)
	}
}

// forgeOf knows github.com and gitlab.com, reads the kind from a forge
// URL's path, and asks for one elsewhere.
func TestForgeOf(t *testing.T) {
	remote := func(u string) identity.Remote {
		r, err := identity.ParseRemote(u)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct{ url, forgeURL, kind, api, repo string }{
		{"git@github.com:org/repo.git", "", "github", "https://api.github.com", "org/repo"},
		{"https://gitlab.com/group/sub/repo.git", "", "gitlab", "https://gitlab.com/api/v4", "group/sub/repo"},
		{"ssh://git@gitea.example:2222/org/repo.git", "https://gitea.example/api/v1/", "gitea", "https://gitea.example/api/v1", "org/repo"},
	} {
		f, err := forgeOf(remote(tc.url), identity.Identity{ForgeURL: tc.forgeURL})
		if err != nil || f.kind != tc.kind || f.api != tc.api || f.repo != tc.repo {
			t.Errorf("%s: %+v %v", tc.url, f, err)
		}
	}
	if _, err := forgeOf(remote("https://git.example/org/repo.git"), identity.Identity{Name: "x"}); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("unknown forge: %v", err)
	}
}

// webURL names the branch's page on the forges warren knows, and nothing
// elsewhere.
func TestWebURL(t *testing.T) {
	for _, tc := range []struct{ remote, forgeURL, want string }{
		{"git@github.com:org/repo.git", "", "https://github.com/org/repo/tree/b"},
		{"https://gitlab.com/g/r.git", "", "https://gitlab.com/g/r/-/tree/b"},
		{"ssh://git@gitea.example/org/repo.git", "https://gitea.example/api/v1", "https://gitea.example/org/repo/src/branch/b"},
		{"ssh://git@git.example/org/repo.git", "", ""},
	} {
		r, err := identity.ParseRemote(tc.remote)
		if err != nil {
			t.Fatal(err)
		}
		if got := webURL(r, identity.Identity{ForgeURL: tc.forgeURL}, "b"); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.remote, got, tc.want)
		}
	}
}
