package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/mcp/oauth"
	"github.com/warrenhq/warren/sessions/bound"
)

// oauthCommand lets the operator see and end what people approved for
// remote clients (docs/remote-clients.md).
func oauthCommand() *cli.Command {
	return &cli.Command{
		Name:  "oauth",
		Usage: "list and revoke what people approved for remote MCP clients ('serve http --public-url')",
		Subcommands: []*cli.Command{
			{Name: "ls", Usage: "list grants: who approved which client, and whether it can still refresh", Flags: []cli.Flag{dataDirFlag()}, Action: runOAuthList},
			{Name: "revoke", Usage: "revoke a grant (every token of it) by id or a prefix of 6 or more characters", ArgsUsage: "ID",
				Flags: []cli.Flag{dataDirFlag()}, Action: runOAuthRevoke},
		},
	}
}

func runOAuthList(c *cli.Context) error {
	dir, err := dataDir(c)
	if err != nil {
		return err
	}
	db, err := openDB(c.Context, dir)
	if err != nil {
		return err
	}
	defer db.Close()
	grants, err := oauth.ListGrants(c.Context, db, time.Now())
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tUSER\tCLIENT\tAPPROVED\tLAST TOKEN\tSTATUS")
	for _, g := range grants {
		status := "active"
		if !g.Active {
			status = "ended"
		}
		client := g.ClientName
		if client == "" {
			client = g.ClientID
		}
		// A client names itself: cut, so that a name cannot fill the screen.
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.User, bound.String(client, 60),
			g.Created.Format(time.RFC3339), g.Refreshed.Format(time.RFC3339), status)
	}
	return w.Flush()
}

func runOAuthRevoke(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit("usage: warren oauth revoke ID (see 'warren oauth ls')", 2)
	}
	dir, err := dataDir(c)
	if err != nil {
		return err
	}
	db, err := openDB(c.Context, dir)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := oauth.RevokeGrant(c.Context, db, c.Args().First(), time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "revoked grant %s: a running server refuses its tokens within 5 s\n", c.Args().First())
	return nil
}
