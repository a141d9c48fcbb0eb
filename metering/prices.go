package metering

import (
	"maps"
	"math"
	"strings"
)

// Price is what a model costs, in US dollars per million tokens. A dollar per million tokens is
// exactly one micro-dollar per token, which is how costs are computed and stored.
type Price struct {
	// Input is the price of uncached input (prompt) tokens.
	Input float64 `json:"input"`
	// Output is the price of output (completion) tokens, reasoning tokens included.
	Output float64 `json:"output"`
	// Cached is the price of input tokens read from the provider's prompt cache. Zero means
	// "not configured" and bills cached tokens at the Input price, so that a price table that
	// forgets the discount over-estimates rather than under-estimates.
	Cached float64 `json:"cached,omitempty"`
}

// defaultPrices are list prices in USD per million tokens at the time of writing. Providers change
// them; deployments that care should set their own table in the configuration.
var defaultPrices = map[string]Price{
	// OpenAI
	"gpt-5":        {Input: 1.25, Output: 10, Cached: 0.125},
	"gpt-5-mini":   {Input: 0.25, Output: 2, Cached: 0.025},
	"gpt-5-nano":   {Input: 0.05, Output: 0.40, Cached: 0.005},
	"gpt-4.1":      {Input: 2, Output: 8, Cached: 0.50},
	"gpt-4.1-mini": {Input: 0.40, Output: 1.60, Cached: 0.10},
	"gpt-4.1-nano": {Input: 0.10, Output: 0.40, Cached: 0.025},
	"gpt-4o":       {Input: 2.50, Output: 10, Cached: 1.25},
	"gpt-4o-mini":  {Input: 0.15, Output: 0.60, Cached: 0.075},
	"o3":           {Input: 2, Output: 8, Cached: 0.50},
	"o3-mini":      {Input: 1.10, Output: 4.40, Cached: 0.55},
	"o4-mini":      {Input: 1.10, Output: 4.40, Cached: 0.275},
	// Anthropic (cache reads; cache writes are not modelled)
	"claude-opus-4":     {Input: 15, Output: 75, Cached: 1.50},
	"claude-opus-4-5":   {Input: 5, Output: 25, Cached: 0.50},
	"claude-sonnet-4":   {Input: 3, Output: 15, Cached: 0.30},
	"claude-haiku-4-5":  {Input: 1, Output: 5, Cached: 0.10},
	"claude-3-7-sonnet": {Input: 3, Output: 15, Cached: 0.30},
	"claude-3-5-sonnet": {Input: 3, Output: 15, Cached: 0.30},
	"claude-3-5-haiku":  {Input: 0.80, Output: 4, Cached: 0.08},
	// Google (prompts up to 200k tokens)
	"gemini-2.5-pro":        {Input: 1.25, Output: 10, Cached: 0.31},
	"gemini-2.5-flash":      {Input: 0.30, Output: 2.50, Cached: 0.075},
	"gemini-2.5-flash-lite": {Input: 0.10, Output: 0.40, Cached: 0.025},
}

// PriceTable returns a copy of the prices c puts in effect, keyed by model name: its own table
// when it has one, else the built-in one (builtIn true).
func (c Config) PriceTable() (prices map[string]Price, builtIn bool) {
	prices, builtIn = inEffect(c.Prices)
	return maps.Clone(prices), builtIn
}

// inEffect is the table a meter given prices uses: prices, or the built-in
// table when prices is empty.
func inEffect(prices map[string]Price) (map[string]Price, bool) {
	if len(prices) > 0 {
		return prices, false
	}
	return defaultPrices, true
}

// MatchPrice returns the entry of prices that prices model, as a Meter matches it (see
// lookup): its key, normalized, and its price; ok is false when the model is unpriced.
func MatchPrice(prices map[string]Price, model string) (key string, p Price, ok bool) {
	return newPriceTable(prices).match(model)
}

// priceTable resolves model names to prices. Keys are normalized once so that lookups are cheap.
type priceTable map[string]Price

func newPriceTable(prices map[string]Price) priceTable {
	t := make(priceTable, len(prices))
	for k, v := range prices {
		t[normalizeModel(k)] = v
	}
	return t
}

// normalizeModel lowercases a model name and drops a provider prefix ("openai/gpt-4o" and
// "GPT-4o" both price as "gpt-4o").
func normalizeModel(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	return m
}

// lookup finds the price for a model: an exact match, or else the longest key that is a prefix
// of the name ending at a '-' boundary, so that dated snapshots ("gpt-4o-2024-08-06",
// "claude-sonnet-4-20250514") price like their family while "gpt-4o" never matches a "gpt-4" key.
func (t priceTable) lookup(model string) (Price, bool) {
	_, p, ok := t.match(model)
	return p, ok
}

// match is lookup that also says which key matched.
func (t priceTable) match(model string) (key string, p Price, ok bool) {
	m := normalizeModel(model)
	if m == "" {
		return "", Price{}, false
	}
	if p, ok := t[m]; ok {
		return m, p, true
	}
	best, found := "", false
	for k := range t {
		if len(k) > len(best) && len(m) > len(k) && m[len(k)] == '-' && strings.HasPrefix(m, k) {
			best, found = k, true
		}
	}
	if !found {
		return "", Price{}, false
	}
	return best, t[best], true
}

// cost returns the cost in micro-dollars, rounded once per record. Reports sum these stored
// integers, so totals always equal the sum of the records.
func (p Price) cost(input, output, cached int64) int64 {
	c := p.Cached
	if c == 0 {
		c = p.Input
	}
	return int64(math.Round(float64(input)*p.Input + float64(output)*p.Output + float64(cached)*c))
}
