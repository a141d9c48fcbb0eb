-- Calls made by warren's own web console (signed in through it), so that
-- the console can set them apart from the agents' calls.
ALTER TABLE session_events ADD COLUMN console INTEGER NOT NULL DEFAULT 0;
