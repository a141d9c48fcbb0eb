package metering

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Formats a report can be written in.
const (
	FormatJSON = "json"
	FormatCSV  = "csv"
)

// Write renders the report in format ("json", the default when empty, or "csv").
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "", FormatJSON:
		return r.WriteJSON(w)
	case FormatCSV:
		return r.WriteCSV(w)
	default:
		return invalidf("report format must be %q or %q, not %q", FormatJSON, FormatCSV, format)
	}
}

// WriteJSON writes the whole report (rows, total, unpriced models, alerts) as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encode report json: %w", err)
	}
	return nil
}

// CSVHeader returns the CSV header for a report grouped by g. The first column is named after the
// dimension.
func CSVHeader(g GroupBy) []string {
	return []string{string(g), "records", "input_tokens", "output_tokens", "cached_tokens",
		"tool_output_bytes", "tool_output_tokens", "cost_usd", "unpriced_records", "estimated_records",
		"estimated_tokens", "network_bytes"}
}

// WriteCSV writes one RFC 4180 row per group under a header. The grand total is deliberately not
// a row: a key like "total" could be a real session name, and spreadsheets sum columns anyway.
// cost_usd is the exact decimal of the stored micro-dollars.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader(r.Query.GroupBy)); err != nil {
		return fmt.Errorf("write csv header: %w", err)
	}
	i := strconv.FormatInt
	for _, row := range r.Rows {
		rec := []string{row.Key, i(row.Records, 10), i(row.InputTokens, 10), i(row.OutputTokens, 10),
			i(row.CachedTokens, 10), i(row.ToolOutputBytes, 10), i(row.ToolOutputTokens, 10),
			formatMicros(row.CostMicros), i(row.UnpricedRecords, 10), i(row.EstimatedRecords, 10),
			i(row.EstimatedTokens, 10), i(row.NetworkBytes, 10)}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write csv row: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("flush csv: %w", err)
	}
	return nil
}
