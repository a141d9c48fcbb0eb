-- Which identity a session was cloned with (its pushes use the same one
-- unless told otherwise), and every push made: task_update links a done
-- task to its session's last push.
CREATE TABLE git_session_identities (
	session_id  TEXT PRIMARY KEY,
	owner       TEXT NOT NULL,
	identity_id TEXT NOT NULL,
	created_at  INTEGER NOT NULL
);

CREATE TABLE git_pushes (
	id          INTEGER PRIMARY KEY,
	session_id  TEXT NOT NULL,
	owner       TEXT NOT NULL,
	branch      TEXT NOT NULL,
	commit_id   TEXT NOT NULL,
	remote      TEXT NOT NULL,
	url         TEXT NOT NULL,
	pr_url      TEXT NOT NULL,
	created_at  INTEGER NOT NULL
);
CREATE INDEX git_pushes_session ON git_pushes (session_id, id);
