-- Times are UTC nanoseconds since the Unix epoch (INTEGER); booleans are 0/1.

CREATE TABLE tenants (
	id          TEXT    PRIMARY KEY,
	name        TEXT    NOT NULL UNIQUE,
	first_party INTEGER NOT NULL DEFAULT 0,
	created_at  INTEGER NOT NULL
);

CREATE TABLE api_keys (
	id         TEXT    PRIMARY KEY,
	tenant_id  TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	hash       TEXT    NOT NULL UNIQUE,
	prefix     TEXT    NOT NULL,
	created_at INTEGER NOT NULL
);

CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE executions (
	exec_id             TEXT    PRIMARY KEY,
	tenant_id           TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	session_id          TEXT    NOT NULL DEFAULT '',
	agent_id            TEXT    NOT NULL DEFAULT '',
	language            TEXT    NOT NULL,
	image               TEXT    NOT NULL DEFAULT '',
	code_sha256         TEXT    NOT NULL DEFAULT '',
	status              TEXT    NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
	exit_code           INTEGER NOT NULL DEFAULT 0,
	stdout              TEXT    NOT NULL DEFAULT '',
	stderr              TEXT    NOT NULL DEFAULT '',
	stdout_truncated    INTEGER NOT NULL DEFAULT 0,
	stderr_truncated    INTEGER NOT NULL DEFAULT 0,
	duration_ms         INTEGER NOT NULL DEFAULT 0,
	peak_memory_mb      INTEGER NOT NULL DEFAULT 0,
	timed_out           INTEGER NOT NULL DEFAULT 0,
	oom_killed          INTEGER NOT NULL DEFAULT 0,
	had_network_attempt INTEGER NOT NULL DEFAULT 0,
	error               TEXT    NOT NULL DEFAULT '',
	artifacts_truncated INTEGER NOT NULL DEFAULT 0,
	created_at          INTEGER NOT NULL,
	finished_at         INTEGER
);

-- Serves ListExecutions (a tenant's rows newest first, keyset paginated).
CREATE INDEX executions_tenant_created ON executions (tenant_id, created_at, exec_id);

-- Serves FailRunningExecutions; only running rows are in it.
CREATE INDEX executions_running ON executions (status) WHERE status = 'running';

CREATE TABLE artifacts (
	id           TEXT    PRIMARY KEY,
	exec_id      TEXT    NOT NULL REFERENCES executions (exec_id) ON DELETE CASCADE,
	tenant_id    TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	filename     TEXT    NOT NULL,
	size_bytes   INTEGER NOT NULL DEFAULT 0,
	content_type TEXT    NOT NULL DEFAULT '',
	sha256       TEXT    NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL
);

CREATE INDEX artifacts_exec ON artifacts (exec_id, filename);
