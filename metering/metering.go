// Package metering records token usage and tool-output volume per user, session, task, client and
// model; prices it; reports it grouped any way as JSON or CSV; fires threshold alerts (optionally
// enforced); and purges records past the retention period.
//
// The package owns its tables in the shared SQLite database and applies its own embedded
// migrations when opened. Every query is scoped to one user unless the caller explicitly asks
// for all users (the admin CLI).
package metering

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/warrenhq/warren/sessions/errs"
)

// ErrInvalid marks errors caused by the caller's input (a missing user, an unknown group-by, a
// bad threshold); they carry the code errs.Invalid, and their message says which argument is
// wrong, so that the MCP layer and the CLI show it as it is.
var ErrInvalid = errs.New(errs.Invalid, "invalid argument")

// DefaultRetention is how long records are kept when Options.Retention is zero.
const DefaultRetention = 90 * 24 * time.Hour

// DefaultPurgeInterval is how often RunRetention purges after its first run.
const DefaultPurgeInterval = 24 * time.Hour

// Config is the metering section of the configuration file. The loader lives elsewhere; this type
// only fixes the JSON shape.
type Config struct {
	// Prices replaces the built-in price table when non-empty (keys are model names).
	Prices map[string]Price `json:"prices,omitempty"`
	// RetentionDays is how long records are kept: 0 means 90 days, a negative value keeps them
	// forever.
	RetentionDays int `json:"retention_days,omitempty"`
	// Thresholds are the usage alerts.
	Thresholds []Threshold `json:"thresholds,omitempty"`
	// LogTranscripts turns on prompt/response logging in the agent. Off by default; when on,
	// everything written must pass through Redact first.
	LogTranscripts bool `json:"log_transcripts,omitempty"`
}

// Options returns the Options this configuration describes. Callbacks and the clock are left for
// the caller to set.
func (c Config) Options() Options {
	o := Options{Prices: c.Prices, Thresholds: c.Thresholds}
	switch {
	case c.RetentionDays < 0:
		o.Retention = -1
	case c.RetentionDays > 0:
		o.Retention = time.Duration(c.RetentionDays) * 24 * time.Hour
	}
	return o
}

// Options configure a Meter. The zero value is usable.
type Options struct {
	// Prices is the price table; nil or empty means the built-in one (Config.PriceTable).
	Prices map[string]Price
	// Retention is how long records are kept: 0 means DefaultRetention, negative keeps forever.
	Retention time.Duration
	// PurgeInterval is the period of RunRetention; 0 means DefaultPurgeInterval.
	PurgeInterval time.Duration
	// Thresholds are checked after every record and by Enforced.
	Thresholds []Threshold
	// Now is the clock; nil means time.Now. Tests inject a fixed clock.
	Now func() time.Time
	// OnAlert is called once for every newly fired alert, after the record that crossed the
	// threshold is committed. The server uses it to log a warning.
	OnAlert func(Alert)
	// OnPurge is called after each purge run by RunRetention, with the number of records deleted
	// or the error.
	OnPurge func(deleted int64, err error)
}

// Meter records and reports usage. It is safe for concurrent use.
type Meter struct {
	db         *sql.DB
	prices     priceTable
	retention  time.Duration
	interval   time.Duration
	thresholds []threshold
	now        func() time.Time
	onAlert    func(Alert)
	onPurge    func(int64, error)
}

// Open applies the package's migrations to db and returns a Meter. The caller owns db and
// closes it.
func Open(ctx context.Context, db *sql.DB, opts Options) (*Meter, error) {
	ths, err := compileThresholds(opts.Thresholds)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, db); err != nil {
		return nil, fmt.Errorf("migrate metering: %w", err)
	}
	m := &Meter{
		db:         db,
		retention:  opts.Retention,
		interval:   opts.PurgeInterval,
		thresholds: ths,
		now:        opts.Now,
		onAlert:    opts.OnAlert,
		onPurge:    opts.OnPurge,
	}
	prices, _ := inEffect(opts.Prices)
	m.prices = newPriceTable(prices)
	if m.retention == 0 {
		m.retention = DefaultRetention
	}
	if m.interval <= 0 {
		m.interval = DefaultPurgeInterval
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m, nil
}

// PriceOf returns the price used for a model, and false when the model is unpriced (its records
// cost 0 and are counted as unpriced in reports).
func (m *Meter) PriceOf(model string) (Price, bool) {
	return m.prices.lookup(model)
}

const msPerDay = 24 * 60 * 60 * 1000

// dayOf is the UTC day number of a Unix-millisecond time; days are UTC everywhere in this package.
func dayOf(ms int64) int64 {
	d := ms / msPerDay
	if ms < 0 && ms%msPerDay != 0 {
		d--
	}
	return d
}

// dayString formats a UTC day number as YYYY-MM-DD.
func dayString(day int64) string {
	return time.UnixMilli(day * msPerDay).UTC().Format(time.DateOnly)
}

func invalidf(format string, args ...any) error {
	return errs.Wrap(errs.Invalid, ErrInvalid, fmt.Sprintf(format, args...))
}
