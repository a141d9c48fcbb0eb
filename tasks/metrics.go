package tasks

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"

	"github.com/warrenhq/warren/sessions/sqlschema"
)

// tracer makes the spans of board changes; without a configured provider
// it is the global no-op.
var tracer = otel.Tracer("github.com/warrenhq/warren/tasks")

// claims counts claim attempts by result. The claim is atomic in the
// database, so a conflict here is two agents wanting the same task.
var claims = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "warren_tasks_claims_total",
	Help: "Task claims and renewals, by result: ok, conflict (someone else holds a live claim) or error.",
}, []string{"result"})

// RegisterMetrics registers the package's counters with r.
func RegisterMetrics(r prometheus.Registerer) error {
	for _, res := range []string{"ok", "conflict", "error"} {
		claims.WithLabelValues(res)
	}
	return r.Register(claims)
}

// countClaim counts the result of one claim.
func countClaim(err error) {
	switch {
	case err == nil:
		claims.WithLabelValues("ok").Inc()
	case errors.Is(err, ErrClaimed):
		claims.WithLabelValues("conflict").Inc()
	default:
		claims.WithLabelValues("error").Inc()
	}
}

var leasesDesc = prometheus.NewDesc("warren_tasks_leases",
	"Task claims in the database, by state: live, or expired (the holder stopped renewing and nobody took the task since).",
	[]string{"state"}, nil)

// LeaseCollector returns a collector of the claims in db, live and
// expired. It reads the database when collected, so the server and
// 'warren status' show the same figures.
func LeaseCollector(db *sql.DB) prometheus.Collector { return leaseCollector{db} }

type leaseCollector struct{ db *sql.DB }

func (c leaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- leasesDesc }

func (c leaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var live, expired float64
	// A data directory whose server never served a task board has no
	// table yet: no claims.
	has, err := sqlschema.HasTable(ctx, c.db, "task_claims")
	if err == nil && has {
		err = c.db.QueryRowContext(ctx, `SELECT count(CASE WHEN expires_at > ?1 THEN 1 END),
			count(CASE WHEN expires_at <= ?1 THEN 1 END) FROM task_claims`,
			time.Now().UnixMilli()).Scan(&live, &expired)
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(leasesDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(leasesDesc, prometheus.GaugeValue, live, "live")
	ch <- prometheus.MustNewConstMetric(leasesDesc, prometheus.GaugeValue, expired, "expired")
}
