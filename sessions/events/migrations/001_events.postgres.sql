-- PostgreSQL variant of 001_events.sql (see sessions/sqlschema): BIGINT for
-- SQLite's 64-bit INTEGER columns, identity columns for its rowids.
-- The activity log of each session: every tool call made in it by any
-- client, the output of its commands as it streamed, and each outcome.
-- Bounded per session: the oldest rows are deleted as new ones come.
CREATE TABLE session_events (
	session_id  TEXT NOT NULL,
	seq         BIGINT NOT NULL, -- per session, from 1, never reused
	at          BIGINT NOT NULL, -- unix milliseconds
	kind        TEXT NOT NULL,    -- call, output or result
	call_id     TEXT NOT NULL DEFAULT '',
	tool        TEXT NOT NULL DEFAULT '',
	client      TEXT NOT NULL DEFAULT '',
	summary     TEXT NOT NULL DEFAULT '', -- redacted
	stream      TEXT NOT NULL DEFAULT '', -- stdout or stderr (output)
	text        TEXT NOT NULL DEFAULT '', -- redacted output
	is_error    BIGINT NOT NULL DEFAULT 0,
	duration_ms BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (session_id, seq)
);
