package metering

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// The package's counters, by model. The model label is the price table's
// entry the record priced as ("gpt-4o" for "openai/gpt-4o-2024-08-06"), or
// "other": clients name models freely, and a label must stay bounded.
var (
	tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warren_metering_tokens_total",
		Help: "Model tokens recorded, by model (price-table entry or other) and kind (input, output, cached).",
	}, []string{"model", "kind"})
	cost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warren_metering_cost_dollars_total",
		Help: "Cost of the model tokens recorded, in US dollars, by model (price-table entry or other).",
	}, []string{"model"})
)

// RegisterMetrics registers the package's counters with r.
func RegisterMetrics(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{tokens, cost} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// countRecorded adds committed model records to the counters.
func (m *Meter) countRecorded(rows []row) {
	for _, w := range rows {
		if w.kind != KindModel {
			continue
		}
		model := m.prices.entry(w.model)
		tokens.WithLabelValues(model, "input").Add(float64(w.input))
		tokens.WithLabelValues(model, "output").Add(float64(w.output))
		tokens.WithLabelValues(model, "cached").Add(float64(w.cached))
		cost.WithLabelValues(model).Add(float64(w.costMicros) / 1e6)
	}
}

// entry names the price-table key a model prices as (lookup's rule), or
// "other".
func (t priceTable) entry(model string) string {
	m := normalizeModel(model)
	if _, ok := t[m]; ok {
		return m
	}
	best := ""
	for k := range t {
		if len(k) > len(best) && len(m) > len(k) && m[len(k)] == '-' && strings.HasPrefix(m, k) {
			best = k
		}
	}
	if best == "" {
		return "other"
	}
	return best
}
