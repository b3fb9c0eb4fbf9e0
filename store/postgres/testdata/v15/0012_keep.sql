-- Keep work: sealed workspace snapshots, tenant data keys, paused sessions.

-- A session may be paused: its sandbox saved to disk on its node and
-- gone, to be resumed later. The state's CHECK constraint gains 'paused'.
ALTER TABLE sessions DROP CONSTRAINT sessions_state_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_state_check
	CHECK (state IN ('creating', 'ready', 'busy', 'destroying', 'destroyed', 'failed', 'paused'));

-- Each tenant's data key, wrapped under the operator's master key named
-- by master_key_id (rotation re-wraps it; the key itself never changes).
CREATE TABLE tenant_data_keys (
	tenant_id     TEXT   PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
	id            TEXT   NOT NULL UNIQUE,
	master_key_id TEXT   NOT NULL,
	wrapped       BYTEA  NOT NULL,
	created_at    BIGINT NOT NULL,
	rotated_at    BIGINT
);

CREATE TABLE snapshots (
	id         TEXT   PRIMARY KEY,
	tenant_id  TEXT   NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	session_id TEXT   NOT NULL,
	name       TEXT   NOT NULL DEFAULT '',
	kind       TEXT   NOT NULL CHECK (kind IN ('workspace', 'memory')),
	runtime    TEXT   NOT NULL DEFAULT '', -- memory snapshots: backend and its snapshot version
	image      TEXT   NOT NULL,
	size       TEXT   NOT NULL,
	bytes      BIGINT NOT NULL,
	sha256     TEXT   NOT NULL,
	entries    BIGINT NOT NULL,
	key_id     TEXT   NOT NULL,
	blob_key   TEXT   NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX snapshots_tenant ON snapshots (tenant_id, created_at, id);

-- A paused session's saved sandbox, on the node that paused it.
CREATE TABLE session_pauses (
	session_id TEXT   PRIMARY KEY,
	tenant_id  TEXT   NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	dir        TEXT   NOT NULL,
	backend    TEXT   NOT NULL,
	paused_at  BIGINT NOT NULL
);
