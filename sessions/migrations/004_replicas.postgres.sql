-- PostgreSQL variant of 004_replicas.sql (see sessions/sqlschema): BIGINT for
-- SQLite's 64-bit INTEGER columns.
-- Replicas (issue #23): one replica drives a session's jail at a time.
-- session_leases holds who does (holder: a replica id, '' when released),
-- until when (expires_at, milliseconds of the database's clock), and the
-- epoch that grows each time the lease changes hands: writes of a session's
-- shell state name the epoch they were made under, and a stale one is
-- refused (fencing). handover is the replica that asked the holder to let
-- go ('' when nobody asks). Rows are kept when released so that epochs
-- never go back.
--
-- mcp_sessions lets an MCP session (Mcp-Session-Id of the 2025 revisions)
-- opened on one replica continue on another: the SHA-256 of its id, its
-- owner, what the client said of itself at initialize (its name and
-- capabilities, as JSON, for the replicas that did not see it), and when
-- it expires unless used.
CREATE TABLE session_leases (
	session_id TEXT PRIMARY KEY,
	holder     TEXT    NOT NULL DEFAULT '',
	epoch      BIGINT  NOT NULL DEFAULT 0,
	expires_at BIGINT  NOT NULL DEFAULT 0,
	handover   TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX session_leases_holder ON session_leases (holder);
CREATE TABLE mcp_sessions (
	id_hash    TEXT PRIMARY KEY,
	owner      TEXT    NOT NULL,
	client     TEXT    NOT NULL DEFAULT '',
	created_at BIGINT  NOT NULL,
	expires_at BIGINT  NOT NULL
);
CREATE INDEX mcp_sessions_owner ON mcp_sessions (owner, created_at);
CREATE INDEX mcp_sessions_expires ON mcp_sessions (expires_at);
