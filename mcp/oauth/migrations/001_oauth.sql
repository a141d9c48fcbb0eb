-- warren's OAuth 2.1 authorization server (package mcp/oauth). Every
-- secret (authorization code, access and refresh token, client secret,
-- login session, pending request id) is kept only as its SHA-256: each is
-- 256 random bits, so a fast hash is enough and a leaked database holds
-- nothing usable.

-- Clients: registered dynamically (kind 'dcr', RFC 7591) or known by the
-- URL of their metadata document (kind 'cimd'; the row caches the
-- document until expires_at). metadata is the JSON warren kept, every
-- string bounded.
CREATE TABLE oauth_clients (
	id          TEXT PRIMARY KEY,
	kind        TEXT NOT NULL,
	metadata    TEXT NOT NULL,
	secret_hash TEXT,
	created_at  BIGINT NOT NULL,
	expires_at  BIGINT,
	last_used_at BIGINT
);

-- Authorization requests waiting for a login and the person's consent.
-- state_hash finds the request when the upstream identity provider
-- redirects back; data is the request as warren checked it.
CREATE TABLE oauth_requests (
	id_hash    TEXT PRIMARY KEY,
	state_hash TEXT UNIQUE,
	data       TEXT NOT NULL,
	expires_at BIGINT NOT NULL
);

-- Authorization codes: one use each. family names what the code issued,
-- so that a second use revokes it.
CREATE TABLE oauth_codes (
	hash         TEXT PRIMARY KEY,
	family       TEXT NOT NULL,
	client_id    TEXT NOT NULL,
	"user"         TEXT NOT NULL,
	redirect_uri TEXT NOT NULL,
	challenge    TEXT NOT NULL,
	resource     TEXT NOT NULL,
	scope        TEXT NOT NULL,
	expires_at   BIGINT NOT NULL,
	used_at      BIGINT
);

-- Access and refresh tokens. A refresh token is used once (rotation); a
-- second use revokes its whole family (every token issued from one
-- authorization code).
CREATE TABLE oauth_tokens (
	hash       TEXT PRIMARY KEY,
	kind       TEXT NOT NULL,
	family     TEXT NOT NULL,
	client_id  TEXT NOT NULL,
	"user"       TEXT NOT NULL,
	resource   TEXT NOT NULL,
	scope      TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,
	used_at    BIGINT,
	revoked_at BIGINT
);
CREATE INDEX oauth_tokens_family ON oauth_tokens (family);

-- Browser sessions of people who signed in at the upstream identity
-- provider (cookie warren_oauth_login).
CREATE TABLE oauth_logins (
	hash       TEXT PRIMARY KEY,
	"user"       TEXT NOT NULL,
	expires_at BIGINT NOT NULL
);
