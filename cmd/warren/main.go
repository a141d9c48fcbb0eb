// Command warren turns a directory or a git repository into jailed workspace
// sessions and serves them to AI agents as MCP tools.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/sessions/errs"
)

func main() {
	app := newApp()
	if err := app.Run(interspersed(app, os.Args)); err != nil {
		printError(os.Stderr, err)
		os.Exit(exitCode(err))
	}
}

// printError prints the one line of a failed command. No error is printed
// without words: one whose message is empty (a bug: every error says what
// went wrong) still names its exit status and where to look.
func printError(w io.Writer, err error) {
	msg := strings.TrimSpace(err.Error())
	if msg == "" {
		msg = fmt.Sprintf("failed with exit status %d, and the error had no message (a bug in warren: please report it; "+
			"--log-level debug shows more)", exitCode(err))
	}
	fmt.Fprintln(w, "warren:", msg)
}

// newApp builds the command tree. Each command lives in its own file and is
// listed here once.
func newApp() *cli.App {
	return &cli.App{
		Name:    "warren",
		Usage:   "jailed workspaces for AI agents, served as MCP tools",
		Version: buildVersion(),
		Commands: []*cli.Command{
			chatCommand(),
			doctorCommand(),
			identityCommand(),
			statusCommand(),
			shellCommand(),
			serveCommand(),
			sessionCommand(),
			tokenCommand(),
			oauthCommand(),
			taskCommand(),
			usageCommand(),
			migrateCommand(),
		},
		// Errors are printed once by main, not by urfave/cli as well.
		ExitErrHandler: func(*cli.Context, error) {},
	}
}

// exitCode maps an error to the process exit status, in one place: a
// cli.ExitCoder keeps its own code; a domain error's code (package errs)
// picks one from exitStatus; anything else is 1.
func exitCode(err error) int {
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	if code, ok := exitStatus[errs.CodeOf(err)]; ok {
		return code
	}
	return exitError
}

// exitStatus is the exit status of each error code that does not exit 1:
// input the user can correct exits 2, as a usage error does.
var exitStatus = map[errs.Code]int{
	errs.Invalid: exitUsage,
}
