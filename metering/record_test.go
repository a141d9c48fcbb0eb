package metering

import (
	"context"
	"errors"
	"testing"

	"github.com/warrenhq/warren/sessions/sqlschema"
)

func TestOpenIsIdempotentAndVersioned(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	// Another package's row must survive our migrations.
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL);
		INSERT INTO schema_versions VALUES ('sessions', 3)`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := Open(ctx, db, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int{}
	rows, err := db.Query(`SELECT component, version FROM schema_versions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		var v int
		if err := rows.Scan(&c, &v); err != nil {
			t.Fatal(err)
		}
		got[c] = v
	}
	ms, _ := sqlschema.Load(migrationFS, "migrations")
	if got["metering"] != ms[len(ms)-1].Version || got["sessions"] != 3 {
		t.Fatalf("schema_versions = %v", got)
	}
}

func TestRecordPricesAndValidates(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	m := mustOpen(t, db, Options{Now: newClock(t0).Now})

	tests := []struct {
		name     string
		rec      Record
		wantCost int64
		unpriced int64
	}{
		// gpt-4o: $2.50 in, $10 out, $1.25 cached per million = micro-dollars per token.
		{"exact", Record{User: "ann", Model: "gpt-4o", InputTokens: 1000, OutputTokens: 100, CachedTokens: 400}, 2500 + 1000 + 500, 0},
		{"dated snapshot", Record{User: "ann", Model: "gpt-4o-2024-08-06", InputTokens: 1000}, 2500, 0},
		{"longest prefix wins", Record{User: "ann", Model: "gpt-4o-mini-2024-07-18", InputTokens: 1000}, 150, 0},
		{"provider prefix and case", Record{User: "ann", Model: "Anthropic/Claude-Sonnet-4-20250514", OutputTokens: 1000}, 15000, 0},
		{"no false prefix", Record{User: "ann", Model: "gpt-4", InputTokens: 1000}, 0, 1},
		{"unknown model", Record{User: "ann", Model: "llama-local", InputTokens: 1000}, 0, 1},
		{"rounded once per record", Record{User: "ann", Model: "gpt-5-nano", InputTokens: 7}, 0, 0}, // 0.35 µ$
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := db.Exec(`DELETE FROM usage_records; DELETE FROM usage_daily`); err != nil {
				t.Fatal(err)
			}
			mustRecord(t, m, tt.rec)
			got := rawTotals(t, db, "1 = 1")
			if got.CostMicros != tt.wantCost || got.UnpricedRecords != tt.unpriced {
				t.Fatalf("cost %d unpriced %d, want %d and %d", got.CostMicros, got.UnpricedRecords, tt.wantCost, tt.unpriced)
			}
			// What 'warren usage prices --model' answers is what was charged.
			table, _ := Config{}.PriceTable()
			key, p, ok := MatchPrice(table, tt.rec.Model)
			if ok != (tt.unpriced == 0) {
				t.Fatalf("MatchPrice(%q) priced %v (as %q), the meter unpriced %d", tt.rec.Model, ok, key, tt.unpriced)
			}
			if c := p.cost(tt.rec.InputTokens, tt.rec.OutputTokens, tt.rec.CachedTokens); ok && c != tt.wantCost {
				t.Fatalf("MatchPrice(%q) = %q %+v, which costs %d, the meter charged %d", tt.rec.Model, key, p, c, tt.wantCost)
			}
		})
	}

	bad := []Record{
		{Model: "gpt-4o"},
		{User: "ann", InputTokens: -1},
		{User: "ann", Kind: "prompt"},
		{User: "ann", Kind: KindToolOutput, InputTokens: 3},
		{User: "ann", Bytes: 3},
	}
	for _, r := range bad {
		if _, err := m.Record(ctx, r); !errors.Is(err, ErrInvalid) {
			t.Errorf("Record(%+v) err = %v, want ErrInvalid", r, err)
		}
	}
}

func TestRecordToolOutputEstimatesTokens(t *testing.T) {
	db, _ := openDB(t)
	m := mustOpen(t, db, Options{Now: newClock(t0).Now})
	if _, err := m.RecordToolOutput(context.Background(), "ann", "s1", "T-1", "claude-desktop", "shell_exec", 1001); err != nil {
		t.Fatal(err)
	}
	var kind, tool, client string
	var bytes, tokens, cost, unpriced, ts int64
	err := db.QueryRow(`SELECT kind, tool, client, tool_bytes, tool_tokens, cost_micros, unpriced, ts FROM usage_records`).
		Scan(&kind, &tool, &client, &bytes, &tokens, &cost, &unpriced, &ts)
	if err != nil {
		t.Fatal(err)
	}
	if kind != KindToolOutput || tool != "shell_exec" || client != "claude-desktop" || bytes != 1001 ||
		tokens != 251 || cost != 0 || unpriced != 0 || ts != t0.UnixMilli() {
		t.Fatalf("got %s %s %s %d %d %d %d %d", kind, tool, client, bytes, tokens, cost, unpriced, ts)
	}
}

// A configured table replaces the built-in one whole, and PriceTable hands
// out copies: a caller editing one changes nothing else.
func TestPriceTableIsTheConfiguredOneOrTheBuiltIn(t *testing.T) {
	builtIn, isBuiltIn := Config{}.PriceTable()
	if !isBuiltIn || builtIn["gpt-4o"] != (Price{Input: 2.50, Output: 10, Cached: 1.25}) || len(builtIn) != len(defaultPrices) {
		t.Fatalf("built-in table: %v entries, builtIn %v, gpt-4o %+v", len(builtIn), isBuiltIn, builtIn["gpt-4o"])
	}
	builtIn["gpt-4o"] = Price{}
	if again, _ := (Config{}).PriceTable(); again["gpt-4o"].Input != 2.50 {
		t.Fatal("editing the returned table changed the built-in one")
	}
	own := Config{Prices: map[string]Price{"my-llm": {Input: 0, Output: 0.01}}}
	got, isBuiltIn := own.PriceTable()
	if isBuiltIn || len(got) != 1 || got["my-llm"].Output != 0.01 {
		t.Fatalf("configured table: %v (builtIn %v)", got, isBuiltIn)
	}
	if _, _, ok := MatchPrice(got, "gpt-4o"); ok {
		t.Fatal("gpt-4o is priced although the configured table replaces the built-in one")
	}
}

func TestConfigOptions(t *testing.T) {
	o := Config{RetentionDays: 30}.Options()
	if o.Retention != 30*24*3600e9 {
		t.Fatalf("retention = %v", o.Retention)
	}
	if (Config{RetentionDays: -1}).Options().Retention >= 0 {
		t.Fatal("negative retention days should keep forever")
	}
	if (Config{}).Options().Retention != 0 {
		t.Fatal("zero retention days should mean the default")
	}
}
