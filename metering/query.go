package metering

import (
	"strings"
	"time"
)

// ParseReportQuery builds a report query from the options shared by usage_report
// and 'warren usage report': a group-by name and an optional range whose
// ends are RFC 3339 times or UTC days (YYYY-MM-DD, meaning midnight).
func ParseReportQuery(groupBy, since, until string) (ReportQuery, error) {
	g, err := ParseGroupBy(strings.TrimSpace(groupBy))
	if err != nil {
		return ReportQuery{}, err
	}
	q := ReportQuery{GroupBy: g}
	if q.Since, err = parseReportTime("since", since); err != nil {
		return q, err
	}
	if q.Until, err = parseReportTime("until", until); err != nil {
		return q, err
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return q, invalidf("until (%s) is before since (%s)", until, since)
	}
	return q, nil
}

func parseReportTime(name, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, invalidf("%s %q: use an RFC 3339 time (2026-05-01T09:00:00Z) or a UTC day (2026-05-01)", name, s)
}
