-- Replicas (issue #23) must share one data directory: it holds the
-- audit repositories and first clones every replica reads. data_dir_id
-- is the id written in the replica-set-id file of the data directory
-- the first replica used; a replica whose data directory holds another
-- id (or makes a new one) is on another volume and refuses to start.
CREATE TABLE shared_data_dir (
	singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
	id        TEXT    NOT NULL,
	made_at   INTEGER NOT NULL
);
