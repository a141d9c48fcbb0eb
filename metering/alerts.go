package metering

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Alert is a fired threshold. Each crossing is stored once, so a restart does not fire it again.
type Alert struct {
	ID        int64  `json:"id"`
	Threshold string `json:"threshold"`
	Scope     Scope  `json:"scope"`
	User      string `json:"user"`
	Session   string `json:"session,omitempty"`
	Metric    Metric `json:"metric"`
	Period    Period `json:"period"`
	// Day is the UTC day (YYYY-MM-DD) a daily threshold was crossed on.
	Day string `json:"day,omitempty"`
	// Limit and Value are in stored units: tokens, bytes, or micro-dollars for MetricCost.
	Limit   int64     `json:"limit"`
	Value   int64     `json:"value"`
	Enforce bool      `json:"enforce"`
	FiredAt time.Time `json:"fired_at"`
	// Message is a one-line description for logs and tool results.
	Message string `json:"message"`
}

func (a *Alert) describe() {
	who := "user " + a.User
	if a.Scope == ScopeSession {
		who = "session " + a.Session + " of user " + a.User
	}
	when := "in total"
	if a.Period == PeriodDay {
		when = "on " + a.Day
	}
	a.Message = fmt.Sprintf("%s reached usage threshold %q: %s %s (limit %s)",
		who, a.Threshold, formatMetric(a.Metric, a.Value), when, formatMetric(a.Metric, a.Limit))
}

type checkKey struct {
	threshold     string
	user, session string
	period        int64
}

// checkAfterInsert evaluates every threshold the inserted rows count towards, once per user,
// session and day, inside the inserting transaction.
func (m *Meter) checkAfterInsert(ctx context.Context, tx *sql.Tx, rows []row) ([]Alert, error) {
	if len(m.thresholds) == 0 {
		return nil, nil
	}
	seen := map[checkKey]bool{}
	var fired []Alert
	for _, w := range rows {
		for _, t := range m.thresholds {
			sess, ok := t.applies(w.user, w.session)
			if !ok {
				continue
			}
			k := checkKey{t.Name, w.user, sess, t.period(w.day)}
			if seen[k] {
				continue
			}
			seen[k] = true
			a, err := m.fire(ctx, tx, t, k)
			if err != nil {
				return nil, err
			}
			if a != nil {
				fired = append(fired, *a)
			}
		}
	}
	return fired, nil
}

// querier is what fire and value need from *sql.DB or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// value sums a threshold's metric from the daily rollup.
func value(ctx context.Context, q querier, t threshold, k checkKey) (int64, error) {
	query := "SELECT coalesce(sum(" + metricSQL[t.Metric] + "), 0) FROM usage_daily WHERE user_id = ?"
	args := []any{k.user}
	if t.Scope == ScopeSession {
		query += " AND session_id = ?"
		args = append(args, k.session)
	}
	if k.period >= 0 {
		query += " AND day = ?"
		args = append(args, k.period)
	}
	var v int64
	if err := q.QueryRowContext(ctx, query, args...).Scan(&v); err != nil {
		return 0, fmt.Errorf("sum usage for threshold %s: %w", t.Name, err)
	}
	return v, nil
}

// fire stores an alert when the threshold is reached and has not fired for this key yet, and
// returns it; it returns nil when nothing new fired.
func (m *Meter) fire(ctx context.Context, q querier, t threshold, k checkKey) (*Alert, error) {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM usage_alerts
		WHERE threshold = ? AND user_id = ? AND session_id = ? AND period = ?`,
		k.threshold, k.user, k.session, k.period).Scan(&one)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("look up alert: %w", err)
	}
	v, err := value(ctx, q, t, k)
	if err != nil || v < t.limit {
		return nil, err
	}
	a := Alert{
		Threshold: t.Name, Scope: t.Scope, User: k.user, Session: k.session, Metric: t.Metric,
		Period: t.Period, Limit: t.limit, Value: v, Enforce: t.Enforce,
		FiredAt: m.now().UTC().Truncate(time.Millisecond),
	}
	if k.period >= 0 {
		a.Day = dayString(k.period)
	}
	// RETURNING, not LastInsertId: PostgreSQL's driver has none.
	err = q.QueryRowContext(ctx, `INSERT INTO usage_alerts (threshold, scope, user_id, session_id,
		period, metric, limit_val, value, enforce, fired_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING RETURNING id`, a.Threshold, string(a.Scope), a.User, a.Session, k.period,
		string(a.Metric), a.Limit, a.Value, a.Enforce, a.FiredAt.UnixMilli()).Scan(&a.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil // another process fired it first
	}
	if err != nil {
		return nil, fmt.Errorf("insert alert: %w", err)
	}
	a.describe()
	return &a, nil
}

const alertColumns = `id, threshold, scope, user_id, session_id, period, metric, limit_val, value,
	enforce, fired_at`

// Alerts lists the alerts fired for a user, newest first.
func (m *Meter) Alerts(ctx context.Context, user string) ([]Alert, error) {
	if user == "" {
		return nil, invalidf("alerts: user is required")
	}
	return m.queryAlerts(ctx, `SELECT `+alertColumns+` FROM usage_alerts WHERE user_id = ?
		ORDER BY fired_at DESC, id DESC`, user)
}

// AllAlerts lists the alerts fired for every user, newest first. It is for the admin CLI only.
func (m *Meter) AllAlerts(ctx context.Context) ([]Alert, error) {
	return m.queryAlerts(ctx, `SELECT `+alertColumns+` FROM usage_alerts
		ORDER BY fired_at DESC, id DESC`)
}

func (m *Meter) queryAlerts(ctx context.Context, query string, args ...any) ([]Alert, error) {
	rows, err := m.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query alerts: %w", err)
	}
	defer rows.Close()
	var out []Alert
	for rows.Next() {
		var a Alert
		var period, firedAt int64
		if err := rows.Scan(&a.ID, &a.Threshold, &a.Scope, &a.User, &a.Session, &period,
			&a.Metric, &a.Limit, &a.Value, &a.Enforce, &firedAt); err != nil {
			return nil, fmt.Errorf("scan alert: %w", err)
		}
		a.Period = PeriodTotal
		if period >= 0 {
			a.Period, a.Day = PeriodDay, dayString(period)
		}
		a.FiredAt = time.UnixMilli(firedAt).UTC()
		a.describe()
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read alerts: %w", err)
	}
	return out, nil
}

// Enforces reports whether any threshold is enforced: only then does Enforced need the latest
// records to be written before it is asked.
func (m *Meter) Enforces() bool {
	for _, t := range m.thresholds {
		if t.Enforce {
			return true
		}
	}
	return false
}

// Enforced reports whether further commands in a session must be refused because an enforced
// threshold (one with Enforce set) for the user or the session is reached in the current period.
// It evaluates the thresholds itself, so a threshold added to the configuration after the usage
// happened still blocks. Errors are returned so that the caller chooses to fail open or closed.
func (m *Meter) Enforced(ctx context.Context, user, session string) (blocked bool, reason string, err error) {
	if user == "" {
		return false, "", invalidf("enforced: user is required")
	}
	today := dayOf(m.now().UnixMilli())
	for _, t := range m.thresholds {
		if !t.Enforce {
			continue
		}
		sess, ok := t.applies(user, session)
		if !ok {
			continue
		}
		k := checkKey{t.Name, user, sess, t.period(today)}
		reason, err := m.enforcedBy(ctx, t, k)
		if err != nil || reason != "" {
			return reason != "", reason, err
		}
	}
	return false, "", nil
}

// enforcedBy returns the reason one enforced threshold blocks, or "" when it does not. The common
// path (not reached) only reads; a transaction is opened only to fire a newly reached threshold.
func (m *Meter) enforcedBy(ctx context.Context, t threshold, k checkKey) (string, error) {
	found, err := m.queryAlerts(ctx, `SELECT `+alertColumns+` FROM usage_alerts
		WHERE threshold = ? AND user_id = ? AND session_id = ? AND period = ?`,
		k.threshold, k.user, k.session, k.period)
	if err != nil {
		return "", err
	}
	if len(found) > 0 {
		return found[0].Message, nil
	}
	v, err := value(ctx, m.db, t, k)
	if err != nil || v < t.limit {
		return "", err
	}
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("begin enforce: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	a, err := m.fire(ctx, tx, t, k)
	if err != nil {
		return "", err
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("commit enforce: %w", err)
	}
	if a == nil {
		// Fired concurrently by another writer; read it back for the message.
		return m.enforcedBy(ctx, t, k)
	}
	m.notify([]Alert{*a})
	return a.Message, nil
}
