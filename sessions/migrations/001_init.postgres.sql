-- PostgreSQL variant of 001_init.sql (see sessions/sqlschema): BIGINT for
-- SQLite's 64-bit INTEGER columns, identity columns for its rowids.
-- Sessions: one row per workspace session. The id is what clients pass as
-- session_id; it survives restarts. default_key marks a user's default
-- session for one binding ("empty", or "bind:<abs dir>") so that a
-- restarted server finds the same session again.
CREATE TABLE sessions (
	id          TEXT PRIMARY KEY,
	owner       TEXT NOT NULL,
	name        TEXT NOT NULL DEFAULT '',
	mode        TEXT NOT NULL,
	source      TEXT NOT NULL DEFAULT '',
	workspace   TEXT NOT NULL,
	state       TEXT NOT NULL DEFAULT 'active',
	default_key TEXT,
	shell_state TEXT NOT NULL DEFAULT '{}',
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);
CREATE INDEX sessions_owner ON sessions (owner);
CREATE UNIQUE INDEX sessions_default ON sessions (owner, default_key) WHERE default_key IS NOT NULL;
