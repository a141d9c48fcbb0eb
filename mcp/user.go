package mcp

import (
	"context"
	"os"
	"os/user"
	"strconv"
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

// LocalUser names the OS user running the server: the user of stdio and of
// HTTP with --auth none.
func LocalUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "uid" + strconv.Itoa(os.Getuid())
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
