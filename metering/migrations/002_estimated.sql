-- Usage a client estimated because its model server sent none (Record.Estimated): reports say
-- how many records and tokens of a total are estimates. In usage_records, estimated is 0 or 1;
-- in the rollup, a count of records.
ALTER TABLE usage_records ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_records ADD COLUMN estimated_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_daily ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_daily ADD COLUMN estimated_tokens INTEGER NOT NULL DEFAULT 0;
