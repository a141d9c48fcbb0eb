package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
	"github.com/warrenhq/warren/sandbox"
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check that this machine can run jails; exits 0 only if it can",
		Action: func(c *cli.Context) error {
			failed := 0
			for _, ch := range sandbox.Doctor(c.Context) {
				mark := "ok  "
				if !ch.OK {
					mark = "warn"
					if ch.Required {
						mark = "FAIL"
						failed++
					}
				}
				fmt.Fprintf(c.App.Writer, "%s  %s: %s\n", mark, ch.Name, ch.Detail)
				if !ch.OK && ch.Fix != "" {
					fmt.Fprintf(c.App.Writer, "      fix: %s\n", ch.Fix)
				}
			}
			if failed > 0 {
				return cli.Exit(fmt.Sprintf("%d required check(s) failed: jails will not work here", failed), 1)
			}
			fmt.Fprintln(c.App.Writer, "jails work on this machine")
			return nil
		},
	}
}
