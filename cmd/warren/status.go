package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/urfave/cli/v2"

	"github.com/warrenhq/warren/sessions"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the data directory's figures (the same as the server's metrics) and whether a server could work on it",
		Description: "Reads the database and the disk of the data directory, as /metrics does for them: sessions by state,\n" +
			"task leases, free disk. Then runs the /readyz checks (database writable, a jail starts, disk not full).\n" +
			"Counters of a running server (tool calls, jails, OOM kills) live in that process: scrape its /metrics.\n" +
			"Exits 1 when a readiness check fails.",
		Flags: []cli.Flag{dataDirFlag(), databaseFlag()},
		Action: func(c *cli.Context) error {
			dir, err := dataDir(c)
			if err != nil {
				return err
			}
			db, err := openDatabase(c, dir)
			if err != nil {
				return err
			}
			defer db.Close()
			if _, err := sessions.NewStore(c.Context, db); err != nil { // its table, on a new data directory
				return err
			}
			reg := prometheus.NewRegistry()
			for _, col := range dataDirCollectors(db, dir) {
				if err := reg.Register(col); err != nil {
					return err
				}
			}
			out := c.App.Writer
			fmt.Fprintf(out, "data directory  %s\n\n", dir)
			families, err := reg.Gather()
			printFamilies(out, families)
			if err != nil { // what could be read is printed; say what could not
				fmt.Fprintf(out, "\nnot read: %v\n", err)
			}
			fmt.Fprintln(out)
			failed := 0
			for _, ch := range readiness(c.Context, db, dir) {
				if ch.err != nil {
					failed++
					fmt.Fprintf(out, "FAIL  %s: %v\n", ch.name, ch.err)
				} else {
					fmt.Fprintf(out, "ok    %s\n", ch.name)
				}
			}
			if failed > 0 {
				return cli.Exit(fmt.Sprintf("%d readiness check(s) failed: a server on this data directory would answer 503 at /readyz", failed), 1)
			}
			return nil
		},
	}
}

// printFamilies prints metric families as the exposition names them, one
// line per series: `name{label="value"} value`.
func printFamilies(w io.Writer, families []*dto.MetricFamily) {
	for _, f := range families {
		lines := make([]string, 0, len(f.GetMetric()))
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := f.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			lines = append(lines, fmt.Sprintf("%-48s %s", name, formatValue(f.GetName(), v)))
		}
		sort.Strings(lines)
		fmt.Fprintf(w, "# %s\n%s\n", f.GetHelp(), strings.Join(lines, "\n"))
	}
}

// formatValue prints byte figures in MiB too, for a person reading them.
func formatValue(name string, v float64) string {
	s := fmt.Sprintf("%.0f", v)
	if v != float64(int64(v)) {
		s = fmt.Sprintf("%g", v)
	}
	if strings.HasSuffix(name, "_bytes") {
		s += fmt.Sprintf("  (%.1f GiB)", v/(1<<30))
	}
	return s
}
