-- Keep work: sealed workspace snapshots, tenant data keys, paused sessions.

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

-- Each tenant's data key, wrapped under the operator's master key named
-- by master_key_id (rotation re-wraps it; the key itself never changes).
CREATE TABLE tenant_data_keys (
	tenant_id     TEXT    PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
	id            TEXT    NOT NULL UNIQUE,
	master_key_id TEXT    NOT NULL,
	wrapped       BLOB    NOT NULL,
	created_at    INTEGER NOT NULL,
	rotated_at    INTEGER
);

CREATE TABLE snapshots (
	id         TEXT    PRIMARY KEY,
	tenant_id  TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	session_id TEXT    NOT NULL,
	name       TEXT    NOT NULL DEFAULT '',
	kind       TEXT    NOT NULL CHECK (kind IN ('workspace', 'memory')),
	runtime    TEXT    NOT NULL DEFAULT '', -- memory snapshots: backend and its snapshot version
	image      TEXT    NOT NULL,
	size       TEXT    NOT NULL,
	bytes      INTEGER NOT NULL,
	sha256     TEXT    NOT NULL,
	entries    INTEGER NOT NULL,
	key_id     TEXT    NOT NULL,
	blob_key   TEXT    NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX snapshots_tenant ON snapshots (tenant_id, created_at, id);

-- A paused session's saved sandbox, on the node that paused it.
CREATE TABLE session_pauses (
	session_id TEXT    PRIMARY KEY,
	tenant_id  TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	dir        TEXT    NOT NULL,
	backend    TEXT    NOT NULL,
	paused_at  INTEGER NOT NULL
);
