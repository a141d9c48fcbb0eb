-- PostgreSQL variant of 002_estimated.sql (see sessions/sqlschema): BIGINT for
-- SQLite's 64-bit INTEGER columns, identity columns for its rowids.
-- Usage a client estimated because its model server sent none (Record.Estimated): reports say
-- how many records and tokens of a total are estimates. In usage_records, estimated is 0 or 1;
-- in the rollup, a count of records.
ALTER TABLE usage_records ADD COLUMN estimated BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN estimated_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_daily ADD COLUMN estimated BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_daily ADD COLUMN estimated_tokens BIGINT NOT NULL DEFAULT 0;
