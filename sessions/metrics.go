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

var quotaDesc = prometheus.NewDesc("warren_sessions_quota_used_ratio_max",
	"The largest share of its disk quota any session of this server uses (last measurement; 0 without a quota).", nil, nil)

// QuotaCollector returns a collector of how full the fullest session's
// disk quota is, from the measurements the quota already makes. One
// figure, not one per session: session ids are not labels.
func (m *Manager) QuotaCollector() prometheus.Collector { return quotaCollector{m} }

type quotaCollector struct{ m *Manager }

func (c quotaCollector) Describe(ch chan<- *prometheus.Desc) { ch <- quotaDesc }

func (c quotaCollector) Collect(ch chan<- prometheus.Metric) {
	var most float64
	if q := c.m.cfg.QuotaBytes; q > 0 {
		c.m.quota.mu.Lock()
		list := make([]*usage, 0, len(c.m.quota.m))
		for _, u := range c.m.quota.m {
			list = append(list, u)
		}
		c.m.quota.mu.Unlock()
		for _, u := range list {
			// TryLock: a walk in progress holds it for seconds; its last
			// figure comes on the next scrape.
			if u.mu.TryLock() {
				most = max(most, float64(u.bytes)/float64(q))
				u.mu.Unlock()
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(quotaDesc, prometheus.GaugeValue, most)
}
