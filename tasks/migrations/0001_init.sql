-- A board is one TASKS.md file; its tasks, notes and claims hang off it.
CREATE TABLE task_boards (
	id        INTEGER PRIMARY KEY,
	path      TEXT NOT NULL UNIQUE,
	-- next task number: ids are never reused, even after a task is deleted
	next_num  INTEGER NOT NULL DEFAULT 1,
	-- JSON of the tasks as they stood in the file after the last sync: the
	-- common ancestor that tells a hand edit from a board change
	base      TEXT NOT NULL DEFAULT '{}',
	synced_at INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE tasks (
	board_id   INTEGER NOT NULL REFERENCES task_boards (id) ON DELETE CASCADE,
	num        INTEGER NOT NULL,
	title      TEXT NOT NULL,
	status     TEXT NOT NULL CHECK (status IN ('open', 'in_progress', 'blocked', 'done')),
	owner      TEXT NOT NULL DEFAULT '',
	link       TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL, -- unix milliseconds
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (board_id, num)
);

CREATE TABLE task_notes (
	board_id INTEGER NOT NULL,
	num      INTEGER NOT NULL,
	seq      INTEGER NOT NULL,
	at       INTEGER NOT NULL, -- unix milliseconds
	author   TEXT NOT NULL DEFAULT '',
	text     TEXT NOT NULL,
	PRIMARY KEY (board_id, num, seq),
	FOREIGN KEY (board_id, num) REFERENCES tasks (board_id, num) ON DELETE CASCADE
);

-- At most one claim per task; an expired row is free for anyone to take.
CREATE TABLE task_claims (
	board_id       INTEGER NOT NULL,
	num            INTEGER NOT NULL,
	holder_user    TEXT NOT NULL,
	holder_session TEXT NOT NULL,
	claimed_at     INTEGER NOT NULL, -- unix milliseconds
	expires_at     INTEGER NOT NULL,
	PRIMARY KEY (board_id, num),
	FOREIGN KEY (board_id, num) REFERENCES tasks (board_id, num) ON DELETE CASCADE
);

CREATE INDEX task_claims_by_session ON task_claims (holder_session, expires_at);
