package main

import (
	"database/sql"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sessions"
)

func usageCommand() *cli.Command {
	who := func() []cli.Flag {
		return []cli.Flag{dataDirFlag(), databaseFlag(), configFlag(),
			&cli.StringFlag{Name: "user", Usage: "whose usage (default: you, the local user)"},
			&cli.BoolFlag{Name: "all-users", Usage: "every user's usage (admin)"},
		}
	}
	report := func(format string) []cli.Flag {
		return append(who(),
			&cli.StringFlag{Name: "group-by", Value: "day", Usage: "session, task, client, model, day (UTC), user or kind"},
			&cli.StringFlag{Name: "since", Usage: "inclusive start: RFC 3339 time or UTC day YYYY-MM-DD"},
			&cli.StringFlag{Name: "until", Usage: "exclusive end: RFC 3339 time or UTC day YYYY-MM-DD"},
			&cli.StringFlag{Name: "format", Value: format, Usage: "table, json or csv (RFC 4180)"},
		)
	}
	return &cli.Command{
		Name:  "usage",
		Usage: "token usage and tool-output volume: reports, exports, alerts",
		Subcommands: []*cli.Command{
			{Name: "report", Usage: "print a usage report", Action: runUsageReport, Flags: report("table")},
			{Name: "export", Usage: "write a usage report as CSV or JSON to a file or stdout", Action: runUsageReport,
				Flags: append(report("csv"), &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write to this file (default stdout)"})},
			{Name: "alerts", Usage: "list the usage thresholds that fired", Action: runUsageAlerts,
				Flags: append(who(), &cli.BoolFlag{Name: "json", Usage: "print JSON"})},
			{Name: "prices", Usage: "print the model prices in effect (built-in, or the config's metering.prices), or which one prices --model",
				Action: runUsagePrices, Flags: []cli.Flag{dataDirFlag(), databaseFlag(), configFlag(),
					&cli.StringFlag{Name: "model", Usage: "say which price a model's records get, as the server matches its name"},
					&cli.BoolFlag{Name: "json", Usage: `print JSON: {"prices": {...}}, the shape of metering.prices in the config`}}},
		},
	}
}

// openUsage opens the meter for a usage command; the config matters for
// its thresholds being valid, not for reading.
func openUsage(c *cli.Context) (*metering.Meter, *sql.DB, error) {
	_, cfg, db, err := openData(c)
	if err != nil {
		return nil, nil, err
	}
	m, err := openMeter(c.Context, db, cfg, zerolog.New(c.App.ErrWriter))
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return m, db, nil
}

// usageUser is --user, or the local user; "" with --all-users.
func usageUser(c *cli.Context) (string, error) {
	if c.Bool("all-users") {
		if c.String("user") != "" {
			return "", cli.Exit("--user and --all-users exclude each other", 2)
		}
		return "", nil
	}
	if u := c.String("user"); u != "" {
		return u, nil
	}
	return sessions.LocalUser(), nil
}

func runUsageReport(c *cli.Context) error {
	format := c.String("format")
	if format != "table" && format != metering.FormatJSON && format != metering.FormatCSV {
		return cli.Exit(fmt.Sprintf("--format %q: want table, json or csv", format), 2)
	}
	q, err := metering.ParseReportQuery(c.String("group-by"), c.String("since"), c.String("until"))
	if err != nil {
		return err // invalid: exits 2 (see exitCode)
	}
	if q.User, err = usageUser(c); err != nil {
		return err
	}
	q.AllUsers = q.User == ""
	m, db, err := openUsage(c)
	if err != nil {
		return err
	}
	defer db.Close()
	rep, err := m.Report(c.Context, q)
	if err != nil {
		return err
	}
	var w io.Writer = c.App.Writer
	if path := c.String("output"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	if format != "table" {
		return rep.Write(w, format)
	}
	return writeReportTable(w, rep)
}

// writeReportTable prints a report for people: one line per group, a total,
// the models without a price and the alerts.
func writeReportTable(out io.Writer, rep *metering.Report) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "%s\tRECORDS\tINPUT\tOUTPUT\tCACHED\tTOOL BYTES\tTOOL TOKENS\tCOST USD\t\n", rep.Query.GroupBy)
	row := func(key string, t metering.Totals) {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.6f\t\n", key, t.Records, t.InputTokens, t.OutputTokens,
			t.CachedTokens, t.ToolOutputBytes, t.ToolOutputTokens, float64(t.CostMicros)/1e6)
	}
	for _, r := range rep.Rows {
		row(r.Key, r.Totals)
	}
	row("TOTAL", rep.Total)
	if err := w.Flush(); err != nil {
		return err
	}
	if len(rep.UnpricedModels) > 0 {
		fmt.Fprintf(out, "\n%d record(s) of models without a price cost 0: %v\n", rep.Total.UnpricedRecords, rep.UnpricedModels)
	}
	if rep.Total.EstimatedRecords > 0 {
		fmt.Fprintf(out, "\n%d record(s), %d tokens, are estimates: the model server reported no usage\n",
			rep.Total.EstimatedRecords, rep.Total.EstimatedTokens)
	}
	for _, a := range rep.Alerts {
		fmt.Fprintf(out, "alert %s: %s\n", a.FiredAt.Format("2006-01-02 15:04"), a.Message)
	}
	return nil
}

func runUsageAlerts(c *cli.Context) error {
	user, err := usageUser(c)
	if err != nil {
		return err
	}
	m, db, err := openUsage(c)
	if err != nil {
		return err
	}
	defer db.Close()
	var alerts []metering.Alert
	if user == "" {
		alerts, err = m.AllAlerts(c.Context)
	} else {
		alerts, err = m.Alerts(c.Context, user)
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, append([]metering.Alert{}, alerts...))
	}
	if len(alerts) == 0 {
		fmt.Fprintln(c.App.ErrWriter, "no usage threshold has fired")
		return nil
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "FIRED\tTHRESHOLD\tENFORCED\tMESSAGE")
	for _, a := range alerts {
		fmt.Fprintf(w, "%s\t%s\t%v\t%s\n", a.FiredAt.Format("2006-01-02 15:04"), a.Threshold, a.Enforce, a.Message)
	}
	return w.Flush()
}
