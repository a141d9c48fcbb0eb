-- PostgreSQL variant of 001_init.sql (see sessions/sqlschema): BIGINT for
-- SQLite's 64-bit INTEGER columns, identity columns for its rowids.
CREATE TABLE agent_chats (
	id            TEXT PRIMARY KEY,
	user_id       TEXT NOT NULL,
	session_id    TEXT NOT NULL,
	parent_id     TEXT NOT NULL DEFAULT '',
	model         TEXT NOT NULL,
	base_url      TEXT NOT NULL,
	title         TEXT NOT NULL DEFAULT '',
	created_ms    BIGINT NOT NULL,
	updated_ms    BIGINT NOT NULL,
	turns         BIGINT NOT NULL DEFAULT 0,
	input_tokens  BIGINT NOT NULL DEFAULT 0,
	output_tokens BIGINT NOT NULL DEFAULT 0,
	cached_tokens BIGINT NOT NULL DEFAULT 0,
	cost_micros   BIGINT NOT NULL DEFAULT 0,
	estimated     BIGINT NOT NULL DEFAULT 0,
	ended         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX agent_chats_user ON agent_chats (user_id, updated_ms);

-- The messages the model sees, in order: what --resume replays.
CREATE TABLE agent_messages (
	chat_id TEXT NOT NULL REFERENCES agent_chats (id) ON DELETE CASCADE,
	seq     BIGINT NOT NULL,
	body    TEXT NOT NULL,
	PRIMARY KEY (chat_id, seq)
);

-- The events of every run, in the stream-json schema.
CREATE TABLE agent_events (
	chat_id TEXT NOT NULL REFERENCES agent_chats (id) ON DELETE CASCADE,
	seq     BIGINT NOT NULL,
	body    TEXT NOT NULL,
	PRIMARY KEY (chat_id, seq)
);

-- What `warren chat doctor` measured of an endpoint and model.
CREATE TABLE agent_profiles (
	base_url  TEXT NOT NULL,
	model     TEXT NOT NULL,
	body      TEXT NOT NULL,
	probed_ms BIGINT NOT NULL,
	PRIMARY KEY (base_url, model)
);
