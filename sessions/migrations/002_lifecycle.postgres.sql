-- PostgreSQL variant of 002_lifecycle.sql (see sessions/sqlschema): BIGINT for
-- SQLite's 64-bit INTEGER columns, identity columns for its rowids.
-- Lifecycle (issue #4): how a workspace was made (ref, base commit of a
-- clone), when the session was last used (idle reaping, LRU) and when it
-- ended (archived or deleted). A deleted session keeps its row as a
-- tombstone for usage reports; its default_key is cleared so that the user
-- gets a fresh default session.
ALTER TABLE sessions ADD COLUMN ref TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN base_commit TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN last_used_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN ended_at BIGINT NOT NULL DEFAULT 0;
CREATE INDEX sessions_owner_state ON sessions (owner, state);
