package mcp

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/warrenhq/warren/metering"
)

// UsageReportInput is the input of usage_report.
type UsageReportInput struct {
	GroupBy string `json:"group_by" jsonschema:"group by session, task, client, model, day (UTC), user or kind"`
	Since   string `json:"since,omitempty" jsonschema:"inclusive start: an RFC 3339 time or a UTC day YYYY-MM-DD; omitted: from the first record"`
	Until   string `json:"until,omitempty" jsonschema:"exclusive end: an RFC 3339 time or a UTC day YYYY-MM-DD (its midnight); omitted: up to now"`
	Format  string `json:"format,omitempty" jsonschema:"json (default) or csv (RFC 4180, also in the csv field)"`
}

// UsageReportOutput is the output of usage_report: your own usage only.
type UsageReportOutput struct {
	GroupBy        string               `json:"group_by" jsonschema:"the grouping of rows"`
	Since          string               `json:"since,omitempty" jsonschema:"the inclusive start, RFC 3339"`
	Until          string               `json:"until,omitempty" jsonschema:"the exclusive end, RFC 3339"`
	Rows           []metering.ReportRow `json:"rows" jsonschema:"one row per group, by key; cost_micros is exact, cost_usd for display"`
	Total          metering.Totals      `json:"total" jsonschema:"sums over all rows"`
	UnpricedModels []string             `json:"unpriced_models" jsonschema:"models without a price: their records cost 0"`
	Alerts         []metering.Alert     `json:"alerts" jsonschema:"usage thresholds reached within the range"`
	CSV            string               `json:"csv,omitempty" jsonschema:"the report as RFC 4180 CSV, when format is csv"`
}

// UsageRecordInput is the input of usage_record.
type UsageRecordInput struct {
	Model        string `json:"model" jsonschema:"the model that used the tokens, e.g. claude-sonnet-4 or gpt-4o"`
	InputTokens  int64  `json:"input_tokens" jsonschema:"uncached input (prompt) tokens"`
	OutputTokens int64  `json:"output_tokens" jsonschema:"output (completion) tokens, reasoning included"`
	CachedTokens int64  `json:"cached_tokens,omitempty" jsonschema:"input tokens read from the provider's prompt cache (not included in input_tokens)"`
	SessionID    string `json:"session_id,omitempty" jsonschema:"the session the work was for; omitted: your default session"`
	Client       string `json:"client,omitempty" jsonschema:"who used the tokens; omitted: your MCP client's name"`
}

// UsageRecordOutput is the output of usage_record.
type UsageRecordOutput struct {
	SessionID string           `json:"session_id" jsonschema:"the session the usage was recorded for"`
	TaskID    string           `json:"task_id,omitempty" jsonschema:"the task the session holds a claim on, if any"`
	Client    string           `json:"client" jsonschema:"the client recorded"`
	Model     string           `json:"model" jsonschema:"the model recorded"`
	Priced    bool             `json:"priced" jsonschema:"false when the model has no price: the record costs 0"`
	Alerts    []metering.Alert `json:"alerts" jsonschema:"usage thresholds this record crossed"`
}

func usageReport(d *deps) Tool {
	t := mcp.NewTool("usage_report",
		mcp.WithDescription("Report your token usage and tool-output volume, grouped by session, task, client, model, "+
			"day, user or kind, over an optional time range, as JSON or CSV. Includes the usage alerts fired in the range."),
		mcp.WithInputSchema[UsageReportInput](),
		mcp.WithOutputSchema[UsageReportOutput](),
		annotations("Report usage", true, false, true, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in UsageReportInput) (result[UsageReportOutput], error) {
		var zero result[UsageReportOutput]
		user, err := callerOf(ctx)
		if err != nil {
			return zero, err
		}
		format := strings.ToLower(strings.TrimSpace(in.Format))
		if format != "" && format != metering.FormatJSON && format != metering.FormatCSV {
			return zero, errorf("format %q: use json or csv", in.Format)
		}
		q, err := metering.ParseReportQuery(in.GroupBy, in.Since, in.Until)
		if err != nil {
			return zero, err
		}
		q.User = user
		d.usage.flush() // the calls before this one count
		rep, err := d.meter.Report(ctx, q)
		if err != nil {
			return zero, err
		}
		out := UsageReportOutput{GroupBy: string(q.GroupBy), Rows: rep.Rows, Total: rep.Total,
			UnpricedModels: rep.UnpricedModels, Alerts: rep.Alerts}
		if !q.Since.IsZero() {
			out.Since = q.Since.Format(time.RFC3339)
		}
		if !q.Until.IsZero() {
			out.Until = q.Until.Format(time.RFC3339)
		}
		var b bytes.Buffer
		if err := rep.Write(&b, format); err != nil {
			return zero, err
		}
		if format == metering.FormatCSV {
			out.CSV = b.String()
		}
		return result[UsageReportOutput]{Out: out, Text: b.String()}, nil
	})
	return Tool{Toolset: "usage", Tool: t, Handler: h}
}

func usageRecord(d *deps) Tool {
	t := mcp.NewTool("usage_record",
		mcp.WithDescription("Report tokens your model used while working in a session, so that usage_report shows "+
			"what the work cost. The record is attributed to the session and to the task it holds a claim on."),
		mcp.WithInputSchema[UsageRecordInput](),
		mcp.WithOutputSchema[UsageRecordOutput](),
		annotations("Record token usage", false, false, false, false),
	)
	h := typedHandler(func(ctx context.Context, _ mcp.CallToolRequest, in UsageRecordInput) (result[UsageRecordOutput], error) {
		var zero result[UsageRecordOutput]
		user, err := callerOf(ctx)
		if err != nil {
			return zero, err
		}
		model := strings.TrimSpace(in.Model)
		if model == "" {
			return zero, errorf("model is empty: name the model that used the tokens, e.g. gpt-4o")
		}
		if in.InputTokens < 0 || in.OutputTokens < 0 || in.CachedTokens < 0 {
			return zero, errorf("token counts must not be negative")
		}
		s, err := d.sessions.Get(ctx, user, in.SessionID)
		if err != nil {
			return zero, err
		}
		client := strings.TrimSpace(in.Client)
		if client == "" {
			client = clientName(ctx)
		}
		task := d.claimOf(ctx, s.ID)
		alerts, err := d.meter.Record(ctx, metering.Record{User: user, Session: s.ID, Task: task, Client: client,
			Model: model, Kind: metering.KindModel,
			InputTokens: in.InputTokens, OutputTokens: in.OutputTokens, CachedTokens: in.CachedTokens})
		if err != nil {
			return zero, err
		}
		_, priced := d.meter.PriceOf(model)
		out := UsageRecordOutput{SessionID: s.ID, TaskID: task, Client: client, Model: model, Priced: priced,
			Alerts: append([]metering.Alert{}, alerts...)}
		text := fmt.Sprintf("recorded %d input, %d output and %d cached tokens of %s for session %s",
			in.InputTokens, in.OutputTokens, in.CachedTokens, model, s.ID)
		if task != "" {
			text += ", task " + task
		}
		if !priced {
			text += "; this model has no price, so the record costs 0"
		}
		for _, a := range alerts {
			text += "\nalert: " + a.Message
		}
		return result[UsageRecordOutput]{Out: out, Text: text}, nil
	})
	return Tool{Toolset: "usage", Tool: t, Handler: h}
}
