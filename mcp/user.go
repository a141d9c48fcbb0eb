package mcp

import (
	"context"
)

type userKey struct{}

// WithUser returns ctx carrying the authenticated user. Transports set it:
// HTTP from the bearer token, stdio from the local OS user.
func WithUser(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, userKey{}, user)
}

// UserFrom returns the user ctx carries, or "".
func UserFrom(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// callerOf returns the user of a tool call; a call that reached a handler
// without one is a wiring bug, refused rather than served as nobody.
func callerOf(ctx context.Context) (string, error) {
	u := UserFrom(ctx)
	if u == "" {
		return "", errorf("no authenticated user for this call: this is a server bug, please report it")
	}
	return u, nil
}
