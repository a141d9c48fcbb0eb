-- PostgreSQL variant of 003_network.sql (see sessions/sqlschema): BIGINT for
-- SQLite's 64-bit INTEGER columns, identity columns for its rowids.
-- Bytes a session's jail moved through warren's egress proxy (kind 'network'): reports show
-- them beside tokens and tool output.
ALTER TABLE usage_records ADD COLUMN network_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_daily ADD COLUMN network_bytes BIGINT NOT NULL DEFAULT 0;
