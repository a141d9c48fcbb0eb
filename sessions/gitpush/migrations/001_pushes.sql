-- Which identity a session was cloned with (its pushes use the same one
-- unless told otherwise), and every push made: task_update links a done
-- task to its session's last push.
CREATE TABLE git_session_identities (
	session_id  TEXT PRIMARY KEY,
	owner       TEXT NOT NULL,
	identity_id TEXT NOT NULL,
	created_at  BIGINT NOT NULL
);

-- seq numbers one session's pushes (1, 2, …) without relying on a
-- database's own row ids, so the table reads the same on PostgreSQL.
CREATE TABLE git_pushes (
	session_id  TEXT NOT NULL,
	seq         BIGINT NOT NULL,
	owner       TEXT NOT NULL,
	branch      TEXT NOT NULL,
	commit_id   TEXT NOT NULL,
	remote      TEXT NOT NULL,
	url         TEXT NOT NULL,
	pr_url      TEXT NOT NULL,
	created_at  BIGINT NOT NULL,
	PRIMARY KEY (session_id, seq)
);
