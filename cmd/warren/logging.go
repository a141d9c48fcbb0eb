package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// logFormatFlag chooses how logs look on stderr.
func logFormatFlag() cli.Flag {
	return &cli.StringFlag{Name: "log-format", Value: "auto",
		Usage: "auto (readable on a terminal, JSON otherwise), console or json"}
}

// newLogger builds the process's logger: JSON lines for machines (files,
// journald, log shippers) and readable lines when a person watches stderr.
// A level or format that is not understood is an error, not a silent
// default.
func newLogger(c *cli.Context) (zerolog.Logger, error) {
	name := c.String("log-level")
	if name == "" { // commands without the flag
		name = "info"
	}
	lvl, err := zerolog.ParseLevel(name)
	if err != nil || lvl == zerolog.NoLevel {
		return zerolog.Logger{}, cli.Exit(fmt.Sprintf("--log-level %q: want debug, info, warn or error", c.String("log-level")), 2)
	}
	var out io.Writer = os.Stderr
	switch f := c.String("log-format"); f {
	case "json":
	case "console":
		out = consoleWriter(false)
	case "auto", "":
		if isTerminal(os.Stderr) {
			out = consoleWriter(true)
		}
	default:
		return zerolog.Logger{}, cli.Exit(fmt.Sprintf("--log-format %q: want auto, console or json", f), 2)
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger(), nil
}

func consoleWriter(color bool) io.Writer {
	return zerolog.ConsoleWriter{Out: os.Stderr, NoColor: !color, TimeFormat: time.TimeOnly}
}
