package sessions

import (
	"os"
	"os/user"
	"strconv"
)

// LocalUser names the OS user running warren: the owner of the sessions
// of stdio, of HTTP with --auth none, and of the CLI's commands.
func LocalUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "uid" + strconv.Itoa(os.Getuid())
}
