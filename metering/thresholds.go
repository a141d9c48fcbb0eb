package metering

import (
	"fmt"
	"math"
	"strings"
)

// Scope says whose usage a threshold counts.
type Scope string

// Scopes.
const (
	// ScopeUser counts all of a user's usage.
	ScopeUser Scope = "user"
	// ScopeSession counts one session's usage; the threshold applies to every session separately
	// unless Threshold.Session names one.
	ScopeSession Scope = "session"
)

// Metric is what a threshold measures.
type Metric string

// Metrics.
const (
	// MetricTokens is input + output + cached tokens reported by models.
	MetricTokens Metric = "tokens"
	// MetricCost is the priced cost; its limit is in US dollars.
	MetricCost Metric = "cost"
	// MetricToolOutputBytes is the volume of tool results the server sent.
	MetricToolOutputBytes Metric = "tool_output_bytes"
	// MetricToolOutputTokens is the estimated tokens of tool results the server sent.
	MetricToolOutputTokens Metric = "tool_output_tokens"
)

// Period is the window a threshold sums over.
type Period string

// Periods.
const (
	// PeriodDay sums over one UTC day; a daily threshold can fire again the next day.
	PeriodDay Period = "day"
	// PeriodTotal sums over all retained records; it fires once.
	PeriodTotal Period = "total"
)

// Threshold is a usage limit from the configuration file.
type Threshold struct {
	// Name identifies the threshold in alerts; empty means one derived from the other fields.
	// Renaming a threshold makes it a new one that can fire again.
	Name  string `json:"name,omitempty"`
	Scope Scope  `json:"scope"`
	// User restricts the threshold to one user; empty means every user.
	User string `json:"user,omitempty"`
	// Session restricts a session-scoped threshold to one session; empty means every session.
	Session string `json:"session,omitempty"`
	Metric  Metric `json:"metric"`
	Period  Period `json:"period"`
	// Limit is in tokens, bytes, or US dollars for MetricCost. Reaching it fires the alert.
	Limit float64 `json:"limit"`
	// Enforce makes Enforced report the session as blocked once the alert has fired, so the
	// shell layer refuses further commands.
	Enforce bool `json:"enforce,omitempty"`
}

// threshold is a validated Threshold with its limit in stored units (micro-dollars for cost).
type threshold struct {
	Threshold
	limit int64
}

func compileThresholds(in []Threshold) ([]threshold, error) {
	out := make([]threshold, 0, len(in))
	seen := map[string]bool{}
	for i, t := range in {
		switch t.Scope {
		case ScopeUser:
			if t.Session != "" {
				return nil, invalidf("threshold %d: session is only allowed with scope %q", i, ScopeSession)
			}
		case ScopeSession:
		default:
			return nil, invalidf("threshold %d: scope must be %q or %q, not %q", i, ScopeUser, ScopeSession, t.Scope)
		}
		switch t.Metric {
		case MetricTokens, MetricCost, MetricToolOutputBytes, MetricToolOutputTokens:
		default:
			return nil, invalidf("threshold %d: unknown metric %q", i, t.Metric)
		}
		if t.Period != PeriodDay && t.Period != PeriodTotal {
			return nil, invalidf("threshold %d: period must be %q or %q, not %q", i, PeriodDay, PeriodTotal, t.Period)
		}
		if !(t.Limit > 0) || math.IsInf(t.Limit, 0) {
			return nil, invalidf("threshold %d: limit must be a positive number", i)
		}
		if t.Name == "" {
			parts := []string{string(t.Scope), string(t.Period), string(t.Metric), fmt.Sprint(t.Limit)}
			if t.User != "" {
				parts = append(parts, t.User)
			}
			if t.Session != "" {
				parts = append(parts, t.Session)
			}
			t.Name = strings.Join(parts, "-")
		}
		if seen[t.Name] {
			return nil, invalidf("threshold %d: duplicate name %q", i, t.Name)
		}
		seen[t.Name] = true
		limit := int64(math.Ceil(t.Limit))
		if t.Metric == MetricCost {
			limit = int64(math.Round(t.Limit * 1e6))
		}
		out = append(out, threshold{Threshold: t, limit: limit})
	}
	return out, nil
}

// applies reports whether t counts usage of this user and session, and the session key its
// alerts are stored under ("" for user scope).
func (t threshold) applies(user, session string) (sessionKey string, ok bool) {
	if t.User != "" && t.User != user {
		return "", false
	}
	if t.Scope == ScopeUser {
		return "", true
	}
	if session == "" || (t.Session != "" && t.Session != session) {
		return "", false
	}
	return session, true
}

// period returns the stored period for a day: the day number, or -1 for totals.
func (t threshold) period(day int64) int64 {
	if t.Period == PeriodTotal {
		return -1
	}
	return day
}

// metricSQL is the rollup expression for each metric.
var metricSQL = map[Metric]string{
	MetricTokens:           "input_tokens + output_tokens + cached_tokens",
	MetricCost:             "cost_micros",
	MetricToolOutputBytes:  "tool_bytes",
	MetricToolOutputTokens: "tool_tokens",
}

// formatMetric renders a stored metric value for people.
func formatMetric(m Metric, v int64) string {
	switch m {
	case MetricCost:
		return "$" + formatMicros(v)
	case MetricTokens:
		return fmt.Sprintf("%d tokens", v)
	case MetricToolOutputBytes:
		return fmt.Sprintf("%d bytes of tool output", v)
	default:
		return fmt.Sprintf("%d estimated tool-output tokens", v)
	}
}

// formatMicros renders micro-dollars as an exact decimal ("1.234567"), never through a float.
func formatMicros(v int64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%06d", sign, v/1e6, v%1e6)
}
