package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/warrenhq/warren/mcp"
	"github.com/warrenhq/warren/metering"
	"github.com/warrenhq/warren/sandbox"
	"github.com/warrenhq/warren/sessions"
	"github.com/warrenhq/warren/tasks"
)

// TestMonitoringDocsNameRealMetrics: every warren_* metric the dashboard,
// the alert rules and docs/operations.md use is one warren exports, and
// the exposition of every package's metrics passes the client library's
// lint.
func TestMonitoringDocsNameRealMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	for _, register := range []func(prometheus.Registerer) error{
		sandbox.RegisterMetrics, mcp.RegisterMetrics, tasks.RegisterMetrics, metering.RegisterMetrics,
	} {
		if err := register(reg); err != nil {
			t.Fatal(err)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}

	known := map[string]bool{"warren_sessions_quota_used_ratio_max": true} // per Manager: see sessions/metrics.go
	descs := make(chan *prometheus.Desc, 100)
	reg.Describe(descs)
	busyRetries.Describe(descs)                            // the database's, registered in newRegistry
	(&sessions.Manager{}).LeaseCollector().Describe(descs) // per Manager, like the quota ratio
	for _, c := range dataDirCollectors(nil, t.TempDir()) {
		c.Describe(descs)
	}
	close(descs)
	name := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range descs {
		if m := name.FindStringSubmatch(d.String()); m != nil {
			known[m[1]] = true
		}
	}
	used := regexp.MustCompile(`\bwarren_[a-z_]+`)
	for _, file := range []string{"../../docs/monitoring/grafana-dashboard.json", "../../docs/monitoring/alerts.yml", "../../docs/operations.md"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range used.FindAllString(string(data), -1) {
			base := m
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if !known[base] && !known[m] && m != "warren_" {
				t.Errorf("%s uses %s, which warren does not export", file, m)
			}
		}
	}
}
