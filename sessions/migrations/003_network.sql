-- Network policy (issue #14): each session's mode (none, allowlist, host)
-- and allowlist as JSON ('' is none, the default), and the egress proxy's
-- recent decisions per session, for session_network_log.
ALTER TABLE sessions ADD COLUMN network TEXT NOT NULL DEFAULT '';
CREATE TABLE network_log (
	id         INTEGER PRIMARY KEY,
	session_id TEXT    NOT NULL,
	ts         INTEGER NOT NULL,
	method     TEXT    NOT NULL,
	target     TEXT    NOT NULL,
	host       TEXT    NOT NULL,
	port       INTEGER NOT NULL,
	allowed    INTEGER NOT NULL,
	reason     TEXT    NOT NULL DEFAULT '',
	status     INTEGER NOT NULL DEFAULT 0,
	addr       TEXT    NOT NULL DEFAULT '',
	bytes_up   INTEGER NOT NULL DEFAULT 0,
	bytes_down INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX network_log_session ON network_log (session_id, id);
