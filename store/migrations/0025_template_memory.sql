-- A template made from a session with its memory holds a memory
-- snapshot: sessions started from the template are restored from it.
ALTER TABLE templates ADD COLUMN memory_snapshot_id TEXT NOT NULL DEFAULT '';
