package metering

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// GroupBy is the dimension a report is grouped by.
type GroupBy string

// Group-by dimensions.
const (
	GroupSession GroupBy = "session"
	GroupTask    GroupBy = "task"
	GroupClient  GroupBy = "client"
	GroupModel   GroupBy = "model"
	// GroupDay groups by UTC day, keys formatted YYYY-MM-DD.
	GroupDay  GroupBy = "day"
	GroupUser GroupBy = "user"
	GroupKind GroupBy = "kind"
)

// groupColumns maps each dimension to the column it reads in both usage_records and usage_daily.
// Only these constants ever reach SQL text.
var groupColumns = map[GroupBy]string{
	GroupSession: "session_id", GroupTask: "task_id", GroupClient: "client", GroupModel: "model",
	GroupDay: "day", GroupUser: "user_id", GroupKind: "kind",
}

// ParseGroupBy validates a group-by name from a tool argument or a flag.
func ParseGroupBy(s string) (GroupBy, error) {
	g := GroupBy(s)
	if _, ok := groupColumns[g]; !ok {
		return "", invalidf("group by must be one of session, task, client, model, day, user, kind; not %q", s)
	}
	return g, nil
}

// ReportQuery selects and groups records.
type ReportQuery struct {
	// User scopes the report; required unless AllUsers is set.
	User string `json:"user,omitempty"`
	// AllUsers reports over every user. Only the admin CLI sets it.
	AllUsers bool    `json:"all_users,omitempty"`
	GroupBy  GroupBy `json:"group_by"`
	// Since is inclusive; zero means from the first record.
	Since time.Time `json:"since,omitzero"`
	// Until is exclusive; zero means up to the last record.
	Until time.Time `json:"until,omitzero"`
}

// Totals are sums over records. Cost is exact in micro-dollars; CostUSD is derived for display.
type Totals struct {
	Records          int64   `json:"records"`
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CachedTokens     int64   `json:"cached_tokens"`
	ToolOutputBytes  int64   `json:"tool_output_bytes"`
	ToolOutputTokens int64   `json:"tool_output_tokens"`
	CostMicros       int64   `json:"cost_micros"`
	CostUSD          float64 `json:"cost_usd"`
	// UnpricedRecords counts model records whose model has no price; their cost is 0.
	UnpricedRecords int64 `json:"unpriced_records"`
	// EstimatedRecords counts model records whose tokens the client estimated (its model server
	// reported none); EstimatedTokens is their input, output and cached tokens.
	EstimatedRecords int64 `json:"estimated_records"`
	EstimatedTokens  int64 `json:"estimated_tokens"`
	// NetworkBytes are the bytes sessions moved through the egress proxy.
	NetworkBytes int64 `json:"network_bytes"`
}

func (t *Totals) add(o Totals) {
	t.Records += o.Records
	t.InputTokens += o.InputTokens
	t.OutputTokens += o.OutputTokens
	t.CachedTokens += o.CachedTokens
	t.ToolOutputBytes += o.ToolOutputBytes
	t.ToolOutputTokens += o.ToolOutputTokens
	t.CostMicros += o.CostMicros
	t.UnpricedRecords += o.UnpricedRecords
	t.EstimatedRecords += o.EstimatedRecords
	t.EstimatedTokens += o.EstimatedTokens
	t.NetworkBytes += o.NetworkBytes
	t.CostUSD = float64(t.CostMicros) / 1e6
}

// ReportRow is one group. Key is the session, task, client, model, user or kind, or the day as
// YYYY-MM-DD; records that had none of the dimension (tool output outside any session, model
// usage reported without a task) are grouped under a key that says so, such as "(no task)",
// with None set.
type ReportRow struct {
	Key  string `json:"key"`
	None bool   `json:"none,omitempty"`
	Totals
}

// noneKey names the group of records without the dimension: a word in
// parentheses, which no session id, task id or day can be.
func noneKey(g GroupBy) string { return "(no " + string(g) + ")" }

// Report is the result of a ReportQuery.
type Report struct {
	Query ReportQuery `json:"query"`
	Rows  []ReportRow `json:"rows"`
	Total Totals      `json:"total"`
	// UnpricedModels lists the models counted in Total.UnpricedRecords, so the report says
	// which costs are missing.
	UnpricedModels []string `json:"unpriced_models"`
	// Alerts are the alerts fired for the reported users within the report's time range.
	Alerts []Alert `json:"alerts"`
}

// span is a half-open range over either whole days (rollup) or milliseconds (records).
type span struct{ lo, hi int64 }

// plan splits [since, until) into whole days read from the rollup and partial days at either
// edge read from the records, so reports never scan every record yet stay exact to the
// millisecond.
func plan(since, until time.Time) (days *span, edges []span) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if !since.IsZero() {
		lo = since.UnixMilli()
	}
	if !until.IsZero() {
		hi = until.UnixMilli()
	}
	if lo >= hi {
		return nil, nil
	}
	dayLo, dayHi := int64(math.MinInt64/msPerDay), int64(math.MaxInt64/msPerDay)
	if !since.IsZero() {
		dayLo = -dayOf(-lo) // ceiling
	}
	if !until.IsZero() {
		dayHi = dayOf(hi)
	}
	if dayLo >= dayHi {
		return nil, []span{{lo, hi}}
	}
	if !since.IsZero() && lo < dayLo*msPerDay {
		edges = append(edges, span{lo, dayLo * msPerDay})
	}
	if !until.IsZero() && dayHi*msPerDay < hi {
		edges = append(edges, span{dayHi * msPerDay, hi})
	}
	return &span{dayLo, dayHi}, edges
}

// Report sums the matching records grouped by q.GroupBy, with a grand total, the unpriced
// models and the alerts fired in the range.
func (m *Meter) Report(ctx context.Context, q ReportQuery) (*Report, error) {
	col, ok := groupColumns[q.GroupBy]
	if !ok {
		return nil, invalidf("report: group by must be one of session, task, client, model, day, user, kind; not %q", q.GroupBy)
	}
	if q.User == "" && !q.AllUsers {
		return nil, invalidf("report: user is required")
	}
	if q.AllUsers {
		q.User = ""
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
		return nil, invalidf("report: until is before since")
	}
	groups := map[string]*Totals{}
	unpriced := map[string]bool{}
	days, edges := plan(q.Since, q.Until)
	if days != nil {
		err := m.sumInto(ctx, groups, unpriced, col, `SUM(records)`, "usage_daily", "day", q.User, *days)
		if err != nil {
			return nil, err
		}
	}
	for _, e := range edges {
		if err := m.sumInto(ctx, groups, unpriced, col, `COUNT(*)`, "usage_records", "ts", q.User, e); err != nil {
			return nil, err
		}
	}
	rep := &Report{Query: q, Rows: make([]ReportRow, 0, len(groups)), UnpricedModels: []string{}}
	for k, t := range groups {
		if q.GroupBy == GroupDay {
			d, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parse day %q: %w", k, err)
			}
			k = dayString(d)
		}
		row := ReportRow{Key: k, Totals: *t}
		if k == "" {
			row.Key, row.None = noneKey(q.GroupBy), true
		}
		rep.Rows = append(rep.Rows, row)
		rep.Total.add(*t)
	}
	sort.Slice(rep.Rows, func(i, j int) bool { return rep.Rows[i].Key < rep.Rows[j].Key })
	for model := range unpriced {
		rep.UnpricedModels = append(rep.UnpricedModels, model)
	}
	sort.Strings(rep.UnpricedModels)
	alerts, err := m.alertsIn(ctx, q)
	if err != nil {
		return nil, err
	}
	rep.Alerts = alerts
	return rep, nil
}

// sumInto adds the grouped sums of one table over one span to groups, and collects the models of
// unpriced records. table, col, count and rangeCol are constants chosen by Report, never input.
func (m *Meter) sumInto(ctx context.Context, groups map[string]*Totals, unpriced map[string]bool,
	col, count, table, rangeCol, user string, s span) error {
	where := rangeCol + " >= ? AND " + rangeCol + " < ?"
	args := []any{s.lo, s.hi}
	if user != "" {
		where = "user_id = ? AND " + where
		args = append([]any{user}, args...)
	}
	rows, err := m.db.QueryContext(ctx, `SELECT `+col+`, `+count+`, SUM(input_tokens),
		SUM(output_tokens), SUM(cached_tokens), SUM(tool_bytes), SUM(tool_tokens),
		SUM(cost_micros), SUM(unpriced), SUM(estimated), SUM(estimated_tokens), SUM(network_bytes) FROM `+table+` WHERE `+where+` GROUP BY `+col, args...)
	if err != nil {
		return fmt.Errorf("query %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var t Totals
		if err := rows.Scan(&key, &t.Records, &t.InputTokens, &t.OutputTokens, &t.CachedTokens,
			&t.ToolOutputBytes, &t.ToolOutputTokens, &t.CostMicros, &t.UnpricedRecords, &t.EstimatedRecords,
			&t.EstimatedTokens, &t.NetworkBytes); err != nil {
			return fmt.Errorf("scan %s: %w", table, err)
		}
		g := groups[key]
		if g == nil {
			g = &Totals{}
			groups[key] = g
		}
		g.add(t)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", table, err)
	}
	rows.Close()
	return m.unpricedModels(ctx, unpriced, table, where, args)
}

func (m *Meter) unpricedModels(ctx context.Context, into map[string]bool, table, where string, args []any) error {
	rows, err := m.db.QueryContext(ctx, `SELECT DISTINCT model FROM `+table+` WHERE `+where+
		` AND unpriced > 0`, args...)
	if err != nil {
		return fmt.Errorf("query unpriced models: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var model string
		if err := rows.Scan(&model); err != nil {
			return fmt.Errorf("scan unpriced model: %w", err)
		}
		into[model] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read unpriced models: %w", err)
	}
	return nil
}

// alertsIn returns the alerts of the report's users fired within its time range.
func (m *Meter) alertsIn(ctx context.Context, q ReportQuery) ([]Alert, error) {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if !q.Since.IsZero() {
		lo = q.Since.UnixMilli()
	}
	if !q.Until.IsZero() {
		hi = q.Until.UnixMilli()
	}
	query := `SELECT ` + alertColumns + ` FROM usage_alerts WHERE fired_at >= ? AND fired_at < ?`
	args := []any{lo, hi}
	if q.User != "" {
		query += ` AND user_id = ?`
		args = append(args, q.User)
	}
	alerts, err := m.queryAlerts(ctx, query+` ORDER BY fired_at DESC, id DESC`, args...)
	if alerts == nil {
		alerts = []Alert{}
	}
	return alerts, err
}
