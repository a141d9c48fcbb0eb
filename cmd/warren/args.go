package main

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves the flags that follow positional arguments in front of
// them, so that `warren task add "x" --workspace D` means what it says:
// urfave/cli stops reading flags at the first positional argument and would
// otherwise take "--workspace" and "D" as more text. Everything after "--"
// stays where it is (a command to run in a session is not ours to parse).
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	cmds, flags := app.Commands, app.Flags
	i := 1
	// Find the leaf command: words that name subcommands, before any flag.
	for i < len(args) {
		c := findCommand(cmds, args[i])
		if c == nil {
			break
		}
		cmds, flags = c.Subcommands, c.Flags
		i++
		if len(cmds) == 0 {
			break
		}
	}
	if len(flags) == 0 {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var front, positional []string
	rest := args[i:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		if a == "--" {
			positional = append(positional, rest[j:]...)
			break
		}
		name, hasValue := flagName(a)
		needs, known := takesValue[name]
		if !known {
			positional = append(positional, a)
			continue
		}
		front = append(front, a)
		if needs && !hasValue && j+1 < len(rest) {
			j++
			front = append(front, rest[j])
		}
	}
	out := append(append([]string(nil), args[:i]...), front...)
	return append(out, positional...)
}

// flagName returns the name in "-x", "--name" or "--name=value", and
// whether the value came attached; "" for anything that is not a flag.
func flagName(a string) (string, bool) {
	if len(a) < 2 || a[0] != '-' || a == "-" {
		return "", false
	}
	name := strings.TrimLeft(a, "-")
	if n, _, ok := strings.Cut(name, "="); ok {
		return n, true
	}
	return name, false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// writeJSON prints v as every --json output of the CLI does: indented, one
// value, a newline after it.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
