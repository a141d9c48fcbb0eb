package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `warren usage prices` shows the table records are costed with: the
// built-in one, or the config's, which replaces it; its --json is what the
// config takes; --model says which entry prices a model, or that none does.
func TestUsagePricesShowsTheTableInEffect(t *testing.T) {
	data := t.TempDir()

	out := warren(t, "usage", "prices", "--data-dir", data)
	if !strings.Contains(out, "Built-in prices") || !strings.Contains(out, filepath.Join(data, "config.json")) {
		t.Fatalf("the table does not say it is the built-in one, nor which config replaces it:\n%s", out)
	}
	if !lineWith(out, "gpt-4o ", "2.500", "10.000", "1.250") || !lineWith(out, "claude-sonnet-4 ", "3.000", "15.000", "0.300") {
		t.Fatalf("the built-in prices are not listed:\n%s", out)
	}

	got := warren(t, "usage", "prices", "--data-dir", data, "--model", "Anthropic/claude-sonnet-4-20250514")
	if !strings.Contains(got, "priced as claude-sonnet-4") || !strings.Contains(got, "output 15.000") {
		t.Fatalf("--model of a dated snapshot: %s", got)
	}
	msg := warrenFails(t, "usage", "prices", "--data-dir", data, "--model", "llama-local")
	if !strings.Contains(msg, "llama-local has no price") || !strings.Contains(msg, "metering.prices") {
		t.Fatalf("an unpriced model: %s", msg)
	}

	// The --json output, pasted into the config, is the same table.
	var table struct {
		Prices map[string]map[string]float64 `json:"prices"`
	}
	raw := warren(t, "usage", "prices", "--data-dir", data, "--json")
	if err := json.Unmarshal([]byte(raw), &table); err != nil || len(table.Prices) < 10 {
		t.Fatalf("--json: %v\n%s", err, raw)
	}
	own := map[string]any{"my-llm": map[string]float64{"input": 0.2, "output": 0.8}}
	cfg := filepath.Join(data, "config.json")
	writeConfig(t, cfg, map[string]any{"metering": map[string]any{"prices": own}})
	out = warren(t, "usage", "prices", "--data-dir", data)
	if !strings.Contains(out, "Prices from "+cfg) || !lineWith(out, "my-llm", "0.200", "0.800", "= input") || strings.Contains(out, "gpt-4o") {
		t.Fatalf("with the config's own table:\n%s", out)
	}
	if msg := warrenFails(t, "usage", "prices", "--data-dir", data, "--model", "gpt-4o"); !strings.Contains(msg, "gpt-4o has no price in the config's metering.prices") {
		t.Fatalf("gpt-4o with a table that replaces the built-in one: %s", msg)
	}
	writeConfig(t, cfg, map[string]any{"metering": json.RawMessage(raw)})
	if again := warren(t, "usage", "prices", "--data-dir", data, "--json"); again != raw {
		t.Fatalf("the --json table pasted into the config reads back differently:\n%s\nwant\n%s", again, raw)
	}

	// A bad config is refused with where it is wrong, as by every command.
	if err := os.WriteFile(cfg, []byte(`{"metering": {"prices": {"x": {"input": "cheap"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(warrenBin, "usage", "prices", "--data-dir", data)
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "config "+cfg) {
		t.Fatalf("a malformed config: %v\n%s", err, b)
	}
}

// lineWith reports whether some line of out holds every one of words.
func lineWith(out string, words ...string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			return true
		}
	}
	return false
}

func writeConfig(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
