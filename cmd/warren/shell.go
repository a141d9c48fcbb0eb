package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/warrenhq/warren/sandbox"
)

func shellCommand() *cli.Command {
	return &cli.Command{
		Name:  "shell",
		Usage: "an interactive jailed shell in a workspace, for humans",
		Description: "Runs a persistent /bin/sh in the same jail agents get. cd and export persist;\n" +
			"Ctrl-C interrupts the running command, not the session; Ctrl-D or 'exit' at the\n" +
			"prompt leaves.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "workspace", Aliases: []string{"w"}, Value: ".", Usage: "directory bound at /workspace"},
			&cli.DurationFlag{Name: "timeout", Value: 0, Usage: "kill a command after this long (0: never)"},
			&cli.BoolFlag{Name: "network", Usage: "give the jail the host's network"},
			&cli.StringSliceFlag{Name: "network-allow", Usage: "let HTTP/HTTPS out through warren's proxy to these presets (npm, pypi, go, github, debian) and host patterns only; repeatable or comma-separated"},
		},
		Action: runShell,
	}
}

func runShell(c *cli.Context) error {
	dir, err := filepath.Abs(c.String("workspace"))
	if err != nil {
		return err
	}
	p := sandbox.DefaultProfile(dir)
	p.Network = c.Bool("network")
	if allow := c.StringSlice("network-allow"); len(allow) > 0 {
		if p.Network {
			return cli.Exit("--network (the host's whole network) and --network-allow are exclusive", 2)
		}
		stop, err := shellEgress(c, &p, networkFromFlags(c).Allow)
		if err != nil {
			return err
		}
		defer stop()
	}
	sh, err := sandbox.NewShell(p, sandbox.Options{})
	if err != nil {
		return err
	}
	defer sh.Close()

	timeout := c.Duration("timeout")
	if timeout == 0 {
		timeout = 365 * 24 * time.Hour
	}
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(interrupts)

	out, errOut := c.App.Writer, c.App.ErrWriter
	// The jail's output reaches the host's terminal only through a filter:
	// escape sequences can act outside the screen (see termFilter).
	jailOut, jailErr := newTermFilter(out), newTermFilter(errOut)
	in := bufio.NewReader(os.Stdin)
	cwd := sandbox.MountPoint
	fmt.Fprintf(errOut, "warren shell: %s is /workspace; Ctrl-D leaves\n", dir)
	for {
		// The jail chose the cwd, and a directory name can hold escapes too.
		fmt.Fprintf(out, "warren:%s$ ", plainText(cwd))
		line, err := readCommand(in, out)
		if errors.Is(err, io.EOF) && strings.TrimSpace(line) == "" {
			fmt.Fprintln(out)
			return nil
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.TrimSpace(line) == "exit" {
			return nil
		}
		ctx, cancel := context.WithCancel(c.Context)
		done := make(chan struct{})
		go func() {
			select {
			case sig := <-interrupts:
				if sig == syscall.SIGTERM {
					sh.Close()
				}
				cancel()
			case <-done:
			}
		}()
		res, err := sh.Exec(ctx, line, sandbox.ExecOptions{
			Timeout: timeout,
			OnOutput: func(s sandbox.Stream, p []byte) {
				if s == sandbox.Stderr {
					jailErr.Write(p)
				} else {
					jailOut.Write(p)
				}
			},
		})
		close(done)
		cancel()
		jailOut.End()
		jailErr.End()
		if err != nil {
			fmt.Fprintln(errOut, "warren:", plainText(err.Error()))
			if errors.Is(err, sandbox.ErrClosed) {
				return nil
			}
			continue
		}
		cwd = res.Cwd
		switch {
		case res.TimedOut:
			fmt.Fprintf(errOut, "[timed out after %s]\n", timeout)
		case res.Interrupted:
			fmt.Fprintln(errOut, "[interrupted]")
		case res.ExitCode != 0:
			fmt.Fprintf(errOut, "[exit %d]\n", res.ExitCode)
		}
		if res.ShellRestarted {
			fmt.Fprintln(errOut, "[the shell exited; a new one started in the same directory with the same exports]")
		}
	}
}

// readCommand reads one line, joining lines that end in a backslash.
func readCommand(in *bufio.Reader, out io.Writer) (string, error) {
	var b strings.Builder
	for {
		line, err := in.ReadString('\n')
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasSuffix(trimmed, "\\") && err == nil {
			b.WriteString(strings.TrimSuffix(trimmed, "\\"))
			fmt.Fprint(out, "> ")
			continue
		}
		b.WriteString(trimmed)
		return b.String(), err
	}
}
