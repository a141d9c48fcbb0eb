package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/mcp/tokens"
)

func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "manage bearer tokens of 'warren serve http'",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "create a token for a user and print it (only this once)",
				Flags:     []cli.Flag{dataDirFlag(), databaseFlag(), &cli.StringFlag{Name: "user", Required: true, Usage: "the user the token acts as"}},
				Action:    runTokenCreate,
				ArgsUsage: " ",
			},
			{Name: "ls", Usage: "list tokens (never the tokens themselves)", Flags: []cli.Flag{dataDirFlag(), databaseFlag()}, Action: runTokenList},
			{Name: "revoke", Usage: "revoke a token by id or prefix", ArgsUsage: "ID", Flags: []cli.Flag{dataDirFlag(), databaseFlag()}, Action: runTokenRevoke},
		},
	}
}

func openTokens(c *cli.Context) (*tokens.Store, func(), error) {
	dir, err := dataDir(c)
	if err != nil {
		return nil, nil, err
	}
	db, err := openDatabase(c, dir)
	if err != nil {
		return nil, nil, err
	}
	ts, err := tokens.Open(c.Context, db)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return ts, func() { db.Close() }, nil
}

func runTokenCreate(c *cli.Context) error {
	ts, done, err := openTokens(c)
	if err != nil {
		return err
	}
	defer done()
	tok, info, err := ts.Create(c.Context, c.String("user"))
	if err != nil {
		return err
	}
	// The token alone on stdout, so that scripts can capture it.
	fmt.Fprintln(c.App.Writer, tok)
	fmt.Fprintf(c.App.ErrWriter, "created token %s for user %s; it is shown only this once\n", info.ID, info.User)
	return nil
}

func runTokenList(c *cli.Context) error {
	ts, done, err := openTokens(c)
	if err != nil {
		return err
	}
	defer done()
	list, err := ts.List(c.Context)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tUSER\tPREFIX\tCREATED\tLAST USED\tSTATUS")
	for _, t := range list {
		used, status := "never", "active"
		if !t.LastUsed.IsZero() {
			used = t.LastUsed.Format(time.RFC3339)
		}
		if t.Revoked {
			status = "revoked"
		}
		fmt.Fprintf(w, "%s\t%s\t%s…\t%s\t%s\t%s\n", t.ID, t.User, t.Prefix, t.CreatedAt.Format(time.RFC3339), used, status)
	}
	return w.Flush()
}

func runTokenRevoke(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit("usage: warren token revoke ID (see 'warren token ls')", 2)
	}
	ts, done, err := openTokens(c)
	if err != nil {
		return err
	}
	defer done()
	if err := ts.Revoke(c.Context, c.Args().First()); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "revoked %s\n", c.Args().First())
	return nil
}
