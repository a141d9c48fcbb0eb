-- PostgreSQL variant of 001_tokens.sql (see sessions/sqlschema): BIGINT for
-- SQLite's 64-bit INTEGER columns, identity columns for its rowids.
-- Bearer tokens for the HTTP transport. Only a SHA-256 of each token is
-- kept: tokens are 256 random bits, so a fast hash is enough and a leaked
-- database does not leak usable tokens. prefix is shown by 'token ls'.
CREATE TABLE auth_tokens (
	id           TEXT PRIMARY KEY,
	"user"       TEXT NOT NULL,
	hash         TEXT NOT NULL UNIQUE,
	prefix       TEXT NOT NULL,
	created_at   BIGINT NOT NULL,
	last_used_at BIGINT,
	revoked_at   BIGINT
);
