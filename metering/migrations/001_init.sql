-- One row per usage event. Times are Unix milliseconds (UTC); day is ts/86400000 so that
-- daily grouping and the rollup need no date functions.
CREATE TABLE usage_records (
	id            INTEGER PRIMARY KEY,
	ts            INTEGER NOT NULL,
	day           INTEGER NOT NULL,
	user_id       TEXT    NOT NULL,
	session_id    TEXT    NOT NULL DEFAULT '',
	task_id       TEXT    NOT NULL DEFAULT '',
	client        TEXT    NOT NULL DEFAULT '',
	model         TEXT    NOT NULL DEFAULT '',
	kind          TEXT    NOT NULL,
	tool          TEXT    NOT NULL DEFAULT '',
	input_tokens  INTEGER NOT NULL DEFAULT 0,
	output_tokens INTEGER NOT NULL DEFAULT 0,
	cached_tokens INTEGER NOT NULL DEFAULT 0,
	tool_bytes    INTEGER NOT NULL DEFAULT 0,
	tool_tokens   INTEGER NOT NULL DEFAULT 0,
	cost_micros   INTEGER NOT NULL DEFAULT 0,
	unpriced      INTEGER NOT NULL DEFAULT 0
);
-- Per-user reports over partial days, and all-user reports and retention.
CREATE INDEX usage_records_user_ts ON usage_records (user_id, ts);
CREATE INDEX usage_records_ts ON usage_records (ts);

-- Daily rollup maintained in the same transaction as each insert: reports over whole days and
-- threshold checks read this table instead of scanning every record.
CREATE TABLE usage_daily (
	user_id       TEXT    NOT NULL,
	day           INTEGER NOT NULL,
	session_id    TEXT    NOT NULL,
	task_id       TEXT    NOT NULL,
	client        TEXT    NOT NULL,
	model         TEXT    NOT NULL,
	kind          TEXT    NOT NULL,
	records       INTEGER NOT NULL,
	input_tokens  INTEGER NOT NULL,
	output_tokens INTEGER NOT NULL,
	cached_tokens INTEGER NOT NULL,
	tool_bytes    INTEGER NOT NULL,
	tool_tokens   INTEGER NOT NULL,
	cost_micros   INTEGER NOT NULL,
	unpriced      INTEGER NOT NULL,
	PRIMARY KEY (user_id, day, session_id, task_id, client, model, kind)
) WITHOUT ROWID;
-- Session totals for thresholds.
CREATE INDEX usage_daily_session ON usage_daily (user_id, session_id, day);

-- Fired alerts. The unique key makes a crossing fire once, across restarts and processes.
-- period is the UTC day number for daily thresholds and -1 for totals.
CREATE TABLE usage_alerts (
	id         INTEGER PRIMARY KEY,
	threshold  TEXT    NOT NULL,
	scope      TEXT    NOT NULL,
	user_id    TEXT    NOT NULL,
	session_id TEXT    NOT NULL,
	period     INTEGER NOT NULL,
	metric     TEXT    NOT NULL,
	limit_val  INTEGER NOT NULL,
	value      INTEGER NOT NULL,
	enforce    INTEGER NOT NULL,
	fired_at   INTEGER NOT NULL,
	UNIQUE (threshold, user_id, session_id, period)
);
CREATE INDEX usage_alerts_user ON usage_alerts (user_id, fired_at);
