// Command warren turns a directory or a git repository into jailed workspace
// sessions and serves them to AI agents as MCP tools.
package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	app := newApp()
	if err := app.Run(interspersed(app, os.Args)); err != nil {
		fmt.Fprintln(os.Stderr, "warren:", err)
		os.Exit(exitCode(err))
	}
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
			shellCommand(),
			serveCommand(),
			sessionCommand(),
			tokenCommand(),
			taskCommand(),
			usageCommand(),
		},
		// Errors are printed once by main, not by urfave/cli as well.
		ExitErrHandler: func(*cli.Context, error) {},
	}
}

// exitCode maps an error to the process exit status: a cli.ExitCoder keeps
// its own code, anything else is 1.
func exitCode(err error) int {
	if ec, ok := err.(cli.ExitCoder); ok {
		return ec.ExitCode()
	}
	return 1
}
