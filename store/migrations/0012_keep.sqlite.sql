-- A session may be paused: its sandbox saved to disk on its node and
-- gone, to be resumed later. The state's CHECK constraint gains
-- 'paused'. SQLite cannot alter a CHECK constraint; the table's text in
-- the schema is edited in place instead (the on-disk format is the same),
-- and RESET makes this connection read the schema again (the tables
-- made below make every other connection do so).
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
	SET sql = replace(sql, '''destroying'', ''destroyed'', ''failed'')', '''destroying'', ''destroyed'', ''failed'', ''paused'')')
	WHERE type = 'table' AND name = 'sessions';
PRAGMA writable_schema = RESET;
