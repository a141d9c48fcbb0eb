package sessions

import (
	"context"
	"database/sql"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
)

// tracer makes the package's spans (session lookup, state saves); without
// a configured provider it is the global no-op.
var tracer = otel.Tracer("github.com/warrenhq/warren/sessions")

var sessionsDesc = prometheus.NewDesc("warren_sessions",
	"Sessions in the database, by state (active, paused, archived, deleted).", []string{"state"}, nil)

// StateCollector returns a collector of the sessions in db by state. It
// reads the database when collected, so the figures are the same for the
// server and for 'warren status' on the same data directory.
func StateCollector(db *sql.DB) prometheus.Collector { return stateCollector{db} }

type stateCollector struct{ db *sql.DB }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts := map[State]float64{StateActive: 0, StatePaused: 0, StateArchived: 0, StateDeleted: 0}
	rows, err := c.db.QueryContext(ctx, `SELECT state, count(*) FROM sessions GROUP BY state`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sessionsDesc, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var st State
		var n float64
		if err := rows.Scan(&st, &n); err != nil {
			ch <- prometheus.NewInvalidMetric(sessionsDesc, err)
			return
		}
		if _, known := counts[st]; known { // a bounded label, whatever the table holds
			counts[st] = n
		}
	}
	if err := rows.Err(); err != nil {
		ch <- prometheus.NewInvalidMetric(sessionsDesc, err)
		return
	}
	for st, n := range counts {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, n, string(st))
	}
}
