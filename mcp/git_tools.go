package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/sessions/gitpush"
)

// IdentityListInput is the input of identity_list.
type IdentityListInput struct{}

// IdentityView describes one identity; never its private key or token.
type IdentityView struct {
	Name        string `json:"name" jsonschema:"pass it as identity to session_create or session_push"`
	AuthorName  string `json:"author_name" jsonschema:"the author name of commits pushed with it"`
	AuthorEmail string `json:"author_email" jsonschema:"the author email of commits pushed with it"`
	PublicKey   string `json:"public_key,omitempty" jsonschema:"its SSH public key (authorized_keys line); omitted when it has a token only"`
	Fingerprint string `json:"fingerprint,omitempty" jsonschema:"the SHA256 fingerprint of its key"`
	HasToken    bool   `json:"has_token" jsonschema:"it has a forge token: https clones and pushes, pull requests"`
	CreatedAt   string `json:"created_at" jsonschema:"RFC 3339"`
}

// IdentityListOutput is the output of identity_list.
type IdentityListOutput struct {
	Identities []IdentityView `json:"identities" jsonschema:"your identities, by name"`
}

func identityList(d *deps) Tool {
	t := mcp.NewTool("identity_list",
		mcp.WithDescription("List your git identities: the key or token a session clones and pushes with (see "+
			"session_create's identity and session_push), and the author of the commits. Secrets are never shown; "+
			"identities are made by the server's operator with 'warren identity create'."),
		mcp.WithInputSchema[IdentityListInput](),
		mcp.WithOutputSchema[IdentityListOutput](),
		annotations("List git identities", true, false, true, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, _ IdentityListInput) (result[IdentityListOutput], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[IdentityListOutput]{}, err
		}
		list, err := d.git.Identities.List(ctx, user)
		if err != nil {
			return result[IdentityListOutput]{}, err
		}
		out := IdentityListOutput{Identities: []IdentityView{}}
		var b strings.Builder
		fmt.Fprintf(&b, "%d identities", len(list))
		for _, id := range list {
			out.Identities = append(out.Identities, IdentityView{Name: id.Name, AuthorName: id.AuthorName,
				AuthorEmail: id.AuthorEmail, PublicKey: id.PublicKey, Fingerprint: id.Fingerprint, HasToken: id.HasToken,
				CreatedAt: id.CreatedAt.Format(time.RFC3339)})
			fmt.Fprintf(&b, "\n%s: %s <%s>", id.Name, id.AuthorName, id.AuthorEmail)
			if id.Fingerprint != "" {
				b.WriteString(", key " + id.Fingerprint)
			}
			if id.HasToken {
				b.WriteString(", token")
			}
		}
		return result[IdentityListOutput]{Out: out, Text: b.String()}, nil
	})
	return Tool{Toolset: "sessions", Tool: t, Handler: h}
}

// SessionPushInput is the input of session_push.
type SessionPushInput struct {
	SessionID   string               `json:"session_id,omitempty" jsonschema:"the session to push; omitted: your default session"`
	Branch      string               `json:"branch,omitempty" jsonschema:"the branch to push to; omitted: warren/<session_id>. A branch that has commits this session did not push is refused"`
	Message     string               `json:"message,omitempty" jsonschema:"the commit message; omitted: one naming the session"`
	Identity    string               `json:"identity,omitempty" jsonschema:"the identity to push with; omitted: the one the session was created with"`
	PullRequest *gitpush.PullRequest `json:"pull_request,omitempty" jsonschema:"open a pull request from the branch (the identity needs a forge token)"`
}

// SessionPushOutput is the output of session_push.
type SessionPushOutput struct {
	SessionID string `json:"session_id" jsonschema:"the session pushed"`
	gitpush.Result
}

func (o SessionPushOutput) inSession() string { return o.SessionID }

func sessionPush(d *deps) Tool {
	t := mcp.NewTool("session_push",
		mcp.WithDescription("Commit the workspace's current state as one commit by the identity's author, on top of "+
			"the commit the session was cloned from (or of its own last push to the branch), and push it to the "+
			"session's source repository; optionally open a pull request. Never overwrites commits it did not push."),
		mcp.WithInputSchema[SessionPushInput](),
		mcp.WithOutputSchema[SessionPushOutput](),
		annotations("Push a session", false, false, false, true),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in SessionPushInput) (result[SessionPushOutput], error) {
		user, err := callerOf(ctx)
		if err != nil {
			return result[SessionPushOutput]{}, err
		}
		s, err := d.sessions.Lookup(ctx, user, in.SessionID)
		if err != nil {
			return result[SessionPushOutput]{}, err
		}
		var notices []string
		res, err := d.git.Push(ctx, user, gitpush.Options{SessionID: s.ID, Branch: in.Branch, Message: in.Message,
			Identity: in.Identity, PullRequest: in.PullRequest, Notice: func(m string) { notices = append(notices, m) }})
		if err != nil {
			return result[SessionPushOutput]{}, err
		}
		text := fmt.Sprintf("pushed %s to branch %s of %s", res.Commit[:12], res.Branch, res.Remote)
		for _, n := range notices {
			text += "\n" + n
		}
		if res.URL != "" {
			text += "\n" + res.URL
		}
		if res.PullRequest != "" {
			text += "\npull request: " + res.PullRequest
		}
		return result[SessionPushOutput]{Out: SessionPushOutput{SessionID: s.ID, Result: res}, Text: text}, nil
	})
	return Tool{Toolset: "sessions", Tool: t, Handler: h}
}

// cloneIdentity sets opts.Auth from the caller's identity name (none: no
// change) and returns what records the new session's identity.
func (d *deps) cloneIdentity(ctx context.Context, user, name string, opts *sessions.CreateOptions, notice func(string)) (func(context.Context, string) error, error) {
	none := func(context.Context, string) error { return nil }
	if name == "" {
		return none, nil
	}
	if d.git == nil {
		return nil, errorf("this server keeps no git identities: create the session without identity")
	}
	if opts.Source == "" {
		return nil, errorf("identity needs a source to clone (an ssh or https URL)")
	}
	auth, id, err := d.git.CloneAuth(ctx, user, name, opts.Source, notice)
	if err != nil {
		return nil, err
	}
	opts.Auth = auth
	return func(ctx context.Context, sessionID string) error {
		return d.git.Store.Link(ctx, user, sessionID, id.ID)
	}, nil
}
