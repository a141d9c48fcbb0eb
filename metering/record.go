package metering

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/warrenhq/warren/sessions/bound"
	"github.com/warrenhq/warren/sessions/sqlschema"
)

// Kinds of record.
const (
	// KindModel is token usage reported by a model call (the built-in agent or usage_record).
	KindModel = "model"
	// KindToolOutput is the server's own record of the bytes of a tool result it sent, so that
	// usage exists even for clients that never report tokens.
	KindToolOutput = "tool_output"
	// KindNetwork records bytes a session's jail moved through the egress
	// proxy (Bytes), up and down together.
	KindNetwork = "network"
)

// Well-known clients. Any other value is an MCP client's name as it introduced itself.
const (
	ClientCLI = "cli"
	ClientWeb = "web"
)

// Record is one usage event.
type Record struct {
	// Time is when the usage happened; zero means now.
	Time time.Time `json:"time"`
	// User owns the usage; required.
	User    string `json:"user"`
	Session string `json:"session,omitempty"`
	// Task is the task the session held a claim on, if any.
	Task string `json:"task,omitempty"`
	// Client is "cli", "web", or the MCP client's name.
	Client string `json:"client,omitempty"`
	Model  string `json:"model,omitempty"`
	// Kind is KindModel (the default) or KindToolOutput.
	Kind string `json:"kind,omitempty"`
	// Tool is the tool whose result a KindToolOutput record measures.
	Tool string `json:"tool,omitempty"`
	// InputTokens are uncached input tokens. OpenAI-style usage counts cached tokens inside
	// prompt_tokens: subtract them before recording, or they are billed twice.
	InputTokens  int64 `json:"input_tokens,omitempty"`
	OutputTokens int64 `json:"output_tokens,omitempty"`
	CachedTokens int64 `json:"cached_tokens,omitempty"`
	// Bytes is the size of a tool result (KindToolOutput), or the bytes moved
	// through the egress proxy (KindNetwork).
	Bytes int64 `json:"bytes,omitempty"`
	// Estimated marks token counts the client estimated because the model server reported
	// none (KindModel only).
	Estimated bool `json:"estimated,omitempty"`
}

// MaxName is the longest model, client, user, session, task, tool or
// kind name a record keeps: usage rows are kept for good (they are
// billing data), and a client chooses its model and client names.
const MaxName = 256

// row is a validated, priced record ready to insert.
type row struct {
	ts, day                   int64
	user, session, task       string
	client, model, kind, tool string
	input, output, cached     int64
	toolBytes, toolTokens     int64
	costMicros, unpriced      int64
	estimated, estTokens      int64
	netBytes                  int64
}

// EstimateTokens estimates the tokens a text of the given size costs a model: about four bytes
// a token for English and code, rounded up.
func EstimateTokens(bytes int64) int64 {
	if bytes <= 0 {
		return 0
	}
	return (bytes + 3) / 4
}

func (m *Meter) prepare(r Record) (row, error) {
	if strings.TrimSpace(r.User) == "" {
		return row{}, invalidf("record: user is required")
	}
	if r.InputTokens < 0 || r.OutputTokens < 0 || r.CachedTokens < 0 || r.Bytes < 0 {
		return row{}, invalidf("record: token and byte counts must not be negative")
	}
	// Every row keeps these texts, and a client chose them.
	for _, f := range []struct{ what, v string }{{"model", r.Model}, {"client", r.Client}, {"user", r.User},
		{"session", r.Session}, {"task", r.Task}, {"tool", r.Tool}, {"kind", r.Kind}} {
		if len(f.v) > MaxName {
			return row{}, invalidf("record: the %s name is %d bytes, over the limit of %d: %q", f.what, len(f.v), MaxName,
				bound.String(f.v, 64))
		}
	}
	t := r.Time
	if t.IsZero() {
		t = m.now()
	}
	w := row{
		ts: t.UnixMilli(), user: r.User, session: r.Session, task: r.Task,
		client: r.Client, model: r.Model, kind: r.Kind, tool: r.Tool,
	}
	w.day = dayOf(w.ts)
	switch w.kind {
	case "", KindModel:
		w.kind = KindModel
		if r.Bytes != 0 {
			return row{}, invalidf("record: bytes are only recorded for %s records", KindToolOutput)
		}
		w.input, w.output, w.cached = r.InputTokens, r.OutputTokens, r.CachedTokens
		if r.Estimated {
			w.estimated, w.estTokens = 1, r.InputTokens+r.OutputTokens+r.CachedTokens
		}
		if p, ok := m.prices.lookup(r.Model); ok {
			w.costMicros = p.cost(w.input, w.output, w.cached)
		} else {
			w.unpriced = 1
		}
	case KindToolOutput:
		// Tool output is not priced: the client's model pays for it as input tokens, which the
		// client may also report; pricing it here would count it twice.
		if r.InputTokens != 0 || r.OutputTokens != 0 || r.CachedTokens != 0 || r.Estimated {
			return row{}, invalidf("record: %s records carry bytes, not tokens (nor an estimated flag)", KindToolOutput)
		}
		w.toolBytes, w.toolTokens = r.Bytes, EstimateTokens(r.Bytes)
	case KindNetwork:
		if r.InputTokens != 0 || r.OutputTokens != 0 || r.CachedTokens != 0 || r.Estimated {
			return row{}, invalidf("record: %s records carry bytes, not tokens", KindNetwork)
		}
		w.netBytes = r.Bytes
	default:
		return row{}, invalidf("record: unknown kind %q", r.Kind)
	}
	return w, nil
}

// Record stores one usage record and returns the alerts it fired (also passed to OnAlert).
func (m *Meter) Record(ctx context.Context, r Record) ([]Alert, error) {
	return m.RecordBatch(ctx, []Record{r})
}

// RecordToolOutput records the size of a tool result the server sent. task and client may be
// empty.
func (m *Meter) RecordToolOutput(ctx context.Context, user, session, task, client, tool string, bytes int) ([]Alert, error) {
	return m.Record(ctx, Record{
		User: user, Session: session, Task: task, Client: client,
		Kind: KindToolOutput, Tool: tool, Bytes: int64(bytes),
	})
}

// RecordBatch stores records in one transaction: all or none. It is the fast path for imports
// and benchmarks; thresholds are checked once per touched user, session and day.
func (m *Meter) RecordBatch(ctx context.Context, records []Record) ([]Alert, error) {
	if len(records) == 0 {
		return nil, nil
	}
	rows := make([]row, len(records))
	for i, r := range records {
		w, err := m.prepare(r)
		if err != nil {
			if len(records) > 1 {
				err = fmt.Errorf("batch item %d: %w", i, err)
			}
			return nil, err
		}
		rows[i] = w
	}
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin record: %w", err)
	}
	defer conn.Close()
	pg := sqlschema.DialectOf(m.db) == sqlschema.Postgres
	if billing(rows) && !pg {
		// Model records are billing data: once acknowledged they must
		// survive a power cut, not only a crash of the process, so their
		// commit waits for the disk (synchronous=FULL syncs the WAL at
		// commit). Tool-output records keep the connection's cheaper
		// setting.
		var prev int
		if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&prev); err != nil {
			return nil, fmt.Errorf("begin record: %w", err)
		}
		if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = FULL"); err != nil {
			return nil, fmt.Errorf("begin record: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA synchronous = %d", prev)) //nolint:errcheck // the connection's own setting again
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin record: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if billing(rows) && pg {
		// The same promise on PostgreSQL: the commit returns once the WAL
		// is flushed to disk, whatever the server's default.
		if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
			return nil, fmt.Errorf("begin record: %w", err)
		}
	}
	if err := insertRows(ctx, tx, rows); err != nil {
		return nil, err
	}
	fired, err := m.checkAfterInsert(ctx, tx, rows)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit record: %w", err)
	}
	m.countRecorded(rows) // metrics.go
	m.notify(fired)
	return fired, nil
}

// billing reports whether rows hold model usage, which is billed.
func billing(rows []row) bool {
	for _, w := range rows {
		if w.kind == KindModel {
			return true
		}
	}
	return false
}

const insertRecordSQL = `INSERT INTO usage_records (ts, day, user_id, session_id, task_id, client, model,
	kind, tool, input_tokens, output_tokens, cached_tokens, tool_bytes, tool_tokens, cost_micros,
	unpriced, estimated, estimated_tokens, network_bytes) VALUES `

const recordPlaceholders = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// rowsPerInsert is how many records one INSERT statement carries. Every statement execution
// crosses into the SQLite runtime, so multi-row statements are much faster for big batches;
// 64 rows × 19 columns stays far below SQLite's limit on bound variables.
const rowsPerInsert = 64

// insertRecords inserts rows with multi-row statements of rowsPerInsert, then one for the rest.
func insertRecords(ctx context.Context, tx *sql.Tx, rows []row) error {
	var full *sql.Stmt
	args := make([]any, 0, rowsPerInsert*19)
	for len(rows) > 0 {
		n := min(len(rows), rowsPerInsert)
		args = args[:0]
		for _, w := range rows[:n] {
			args = append(args, w.ts, w.day, w.user, w.session, w.task, w.client, w.model, w.kind,
				w.tool, w.input, w.output, w.cached, w.toolBytes, w.toolTokens, w.costMicros,
				w.unpriced, w.estimated, w.estTokens, w.netBytes)
		}
		var err error
		if n == rowsPerInsert {
			if full == nil {
				if full, err = tx.PrepareContext(ctx, insertSQL(n)); err != nil {
					return fmt.Errorf("prepare insert records: %w", err)
				}
				defer full.Close()
			}
			_, err = full.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, insertSQL(n), args...)
		}
		if err != nil {
			return fmt.Errorf("insert records: %w", err)
		}
		rows = rows[n:]
	}
	return nil
}

func insertSQL(n int) string {
	return insertRecordSQL + strings.Repeat(recordPlaceholders+", ", n-1) + recordPlaceholders
}

const upsertDailySQL = `INSERT INTO usage_daily (user_id, day, session_id, task_id, client, model, kind,
	records, input_tokens, output_tokens, cached_tokens, tool_bytes, tool_tokens, cost_micros,
	unpriced, estimated, estimated_tokens, network_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (user_id, day, session_id, task_id, client, model, kind) DO UPDATE SET
		records = usage_daily.records + excluded.records,
		input_tokens = usage_daily.input_tokens + excluded.input_tokens,
		output_tokens = usage_daily.output_tokens + excluded.output_tokens,
		cached_tokens = usage_daily.cached_tokens + excluded.cached_tokens,
		tool_bytes = usage_daily.tool_bytes + excluded.tool_bytes,
		tool_tokens = usage_daily.tool_tokens + excluded.tool_tokens,
		cost_micros = usage_daily.cost_micros + excluded.cost_micros,
		unpriced = usage_daily.unpriced + excluded.unpriced,
		estimated = usage_daily.estimated + excluded.estimated,
		estimated_tokens = usage_daily.estimated_tokens + excluded.estimated_tokens,
		network_bytes = usage_daily.network_bytes + excluded.network_bytes`

// dailyKey is a row's key in the daily rollup.
type dailyKey struct {
	user                               string
	day                                int64
	session, task, client, model, kind string
}

// totals is what one row adds to a rollup row or a report.
func (w row) totals() Totals {
	return Totals{Records: 1, InputTokens: w.input, OutputTokens: w.output, CachedTokens: w.cached,
		ToolOutputBytes: w.toolBytes, ToolOutputTokens: w.toolTokens, CostMicros: w.costMicros,
		UnpricedRecords: w.unpriced, EstimatedRecords: w.estimated, EstimatedTokens: w.estTokens,
		NetworkBytes: w.netBytes}
}

// insertRows writes each row and folds the batch into the daily rollup in the same transaction,
// so the rollup can never disagree with the records. Rows are summed per rollup key in memory
// first: a batch touches few keys, and one upsert per key instead of per row nearly halves the
// cost of a large batch.
func insertRows(ctx context.Context, tx *sql.Tx, rows []row) error {
	if err := insertRecords(ctx, tx, rows); err != nil {
		return err
	}
	sums := map[dailyKey]*Totals{}
	var order []dailyKey // deterministic upsert order, so concurrent writers lock alike
	for _, w := range rows {
		k := dailyKey{w.user, w.day, w.session, w.task, w.client, w.model, w.kind}
		s := sums[k]
		if s == nil {
			s = &Totals{}
			sums[k] = s
			order = append(order, k)
		}
		s.add(w.totals())
	}
	up, err := tx.PrepareContext(ctx, upsertDailySQL)
	if err != nil {
		return fmt.Errorf("prepare upsert daily: %w", err)
	}
	defer up.Close()
	for _, k := range order {
		s := sums[k]
		if _, err := up.ExecContext(ctx, k.user, k.day, k.session, k.task, k.client, k.model,
			k.kind, s.Records, s.InputTokens, s.OutputTokens, s.CachedTokens, s.ToolOutputBytes,
			s.ToolOutputTokens, s.CostMicros, s.UnpricedRecords, s.EstimatedRecords, s.EstimatedTokens, s.NetworkBytes); err != nil {
			return fmt.Errorf("update daily rollup: %w", err)
		}
	}
	return nil
}

func (m *Meter) notify(alerts []Alert) {
	if m.onAlert == nil {
		return
	}
	for _, a := range alerts {
		m.onAlert(a)
	}
}
