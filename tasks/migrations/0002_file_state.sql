-- What the last sync saw of the file, so that a change to one task can
-- skip reading the whole file when nobody touched it since.
-- file_sig identifies the file's version (inode, size, times); conflicts
-- lists the task numbers left in conflict, which changes must not touch.
ALTER TABLE task_boards ADD COLUMN file_sig TEXT NOT NULL DEFAULT '';
ALTER TABLE task_boards ADD COLUMN conflicts TEXT NOT NULL DEFAULT '[]';
