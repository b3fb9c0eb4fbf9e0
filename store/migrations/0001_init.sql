-- Times are UTC nanoseconds since the Unix epoch (64-bit integers), in
-- both dialects, so both keep a time to the nanosecond. The words in
-- double braces are the dialect's types (see package migrations).

CREATE TABLE tenants (
	id          TEXT     PRIMARY KEY,
	name        TEXT     NOT NULL UNIQUE,
	first_party {{bool}} NOT NULL DEFAULT {{false}},
	created_at  {{int}}  NOT NULL
);

CREATE TABLE api_keys (
	id         TEXT    PRIMARY KEY,
	tenant_id  TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	hash       TEXT    NOT NULL UNIQUE,
	prefix     TEXT    NOT NULL,
	created_at {{int}} NOT NULL
);

CREATE INDEX api_keys_tenant ON api_keys (tenant_id);

CREATE TABLE executions (
	exec_id             TEXT     PRIMARY KEY,
	tenant_id           TEXT     NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	session_id          TEXT     NOT NULL DEFAULT '',
	agent_id            TEXT     NOT NULL DEFAULT '',
	language            TEXT     NOT NULL,
	image               TEXT     NOT NULL DEFAULT '',
	code_sha256         TEXT     NOT NULL DEFAULT '',
	status              TEXT     NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
	exit_code           INTEGER  NOT NULL DEFAULT 0,
	stdout              TEXT     NOT NULL DEFAULT '',
	stderr              TEXT     NOT NULL DEFAULT '',
	stdout_truncated    {{bool}} NOT NULL DEFAULT {{false}},
	stderr_truncated    {{bool}} NOT NULL DEFAULT {{false}},
	duration_ms         {{int}}  NOT NULL DEFAULT 0,
	peak_memory_mb      {{int}}  NOT NULL DEFAULT 0,
	timed_out           {{bool}} NOT NULL DEFAULT {{false}},
	oom_killed          {{bool}} NOT NULL DEFAULT {{false}},
	had_network_attempt {{bool}} NOT NULL DEFAULT {{false}},
	error               TEXT     NOT NULL DEFAULT '',
	artifacts_truncated {{bool}} NOT NULL DEFAULT {{false}},
	created_at          {{int}}  NOT NULL,
	finished_at         {{int}}
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
	size_bytes   {{int}} NOT NULL DEFAULT 0,
	content_type TEXT    NOT NULL DEFAULT '',
	sha256       TEXT    NOT NULL DEFAULT '',
	created_at   {{int}} NOT NULL
);

CREATE INDEX artifacts_exec ON artifacts (exec_id, filename);
