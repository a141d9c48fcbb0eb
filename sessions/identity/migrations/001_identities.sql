-- Git identities: who a session's commits are by, and the key or token a
-- clone and a push log in with. The private key and the token are sealed
-- (AES-256-GCM under the server key, bound to the row's id and column):
-- a copy of the database alone opens neither.
CREATE TABLE git_identities (
	id           TEXT PRIMARY KEY,
	owner        TEXT NOT NULL,
	name         TEXT NOT NULL,
	author_name  TEXT NOT NULL,
	author_email TEXT NOT NULL,
	public_key   TEXT NOT NULL,
	sealed_key   TEXT NOT NULL,
	sealed_token TEXT NOT NULL,
	token_user   TEXT NOT NULL,
	forge_url    TEXT NOT NULL,
	created_at   BIGINT NOT NULL,
	UNIQUE (owner, name)
);

-- SSH host keys pinned per identity on first use: a later clone or push
-- to the same host and port with another key is refused.
CREATE TABLE git_known_hosts (
	identity_id TEXT NOT NULL REFERENCES git_identities (id) ON DELETE CASCADE,
	host        TEXT NOT NULL,
	key_type    TEXT NOT NULL,
	public_key  TEXT NOT NULL,
	created_at  BIGINT NOT NULL,
	PRIMARY KEY (identity_id, host)
);
