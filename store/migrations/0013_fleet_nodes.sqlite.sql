-- The state's CHECK constraint gains 'lost' (as 0012 added 'paused':
-- the table's text in the schema is edited in place).
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
	SET sql = replace(sql, '''failed'', ''paused'')', '''failed'', ''paused'', ''lost'')')
	WHERE type = 'table' AND name = 'sessions';
PRAGMA writable_schema = RESET;
