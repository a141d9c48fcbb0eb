package metering

import (
	"context"
	"fmt"
	"time"
)

// Purge deletes the records older than the retention period and returns how many it deleted.
// The daily rollup is trimmed in the same transaction, and the day the cutoff falls in is rebuilt
// from the records that remain, so reports still equal the records. Daily alerts for purged days
// go too; total alerts stay so they never fire twice.
func (m *Meter) Purge(ctx context.Context) (int64, error) {
	if m.retention < 0 {
		return 0, nil
	}
	cutoff := m.now().Add(-m.retention).UnixMilli()
	cutoffDay := dayOf(cutoff)
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin purge: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	res, err := tx.ExecContext(ctx, `DELETE FROM usage_records WHERE ts < ?`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("delete records: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("count deleted records: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM usage_daily WHERE day <= ?`, cutoffDay); err != nil {
		return 0, fmt.Errorf("delete daily rollup: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO usage_daily (user_id, day, session_id, task_id, client,
		model, kind, records, input_tokens, output_tokens, cached_tokens, tool_bytes, tool_tokens,
		cost_micros, unpriced, estimated, estimated_tokens, network_bytes)
		SELECT user_id, day, session_id, task_id, client, model, kind, COUNT(*), SUM(input_tokens),
			SUM(output_tokens), SUM(cached_tokens), SUM(tool_bytes), SUM(tool_tokens),
			SUM(cost_micros), SUM(unpriced), SUM(estimated), SUM(estimated_tokens), SUM(network_bytes)
		FROM usage_records WHERE ts >= ? AND ts < ?
		GROUP BY user_id, day, session_id, task_id, client, model, kind`,
		cutoff, (cutoffDay+1)*msPerDay); err != nil {
		return 0, fmt.Errorf("rebuild daily rollup: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM usage_alerts WHERE period >= 0 AND period < ?`,
		cutoffDay); err != nil {
		return 0, fmt.Errorf("delete old alerts: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit purge: %w", err)
	}
	return n, nil
}

// RunRetention purges now and then every PurgeInterval (a day by default) until ctx is done.
// Each run's result goes to Options.OnPurge; a failed run is retried at the next tick. Start it
// in its own goroutine.
func (m *Meter) RunRetention(ctx context.Context) {
	tick := time.NewTicker(m.interval)
	defer tick.Stop()
	for {
		n, err := m.Purge(ctx)
		if ctx.Err() != nil {
			return
		}
		if m.onPurge != nil {
			m.onPurge(n, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
