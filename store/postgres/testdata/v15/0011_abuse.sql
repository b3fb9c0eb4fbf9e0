-- Which limit ended each execution (ended_by: wall_time, memory, ... or
-- abuse:<detector>) and the limits it ran into without being ended
-- (limits_hit, comma-separated: output, disk, processes, ...). Both are
-- '' for executions recorded before.
ALTER TABLE executions ADD COLUMN ended_by TEXT NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN limits_hit TEXT NOT NULL DEFAULT '';

-- Abuse events: what a detector of the node saw and what was done. The
-- evidence is figures the detector measured (JSON), never a secret.
-- Times are UTC nanoseconds since the Unix epoch.
CREATE TABLE abuse_events (
	seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- the cursor: increasing, never reused
	id           TEXT   NOT NULL UNIQUE,
	tenant_id    TEXT   NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	session_id   TEXT   NOT NULL DEFAULT '',
	execution_id TEXT   NOT NULL DEFAULT '',
	sandbox_id   TEXT   NOT NULL DEFAULT '',
	detector     TEXT   NOT NULL,
	summary      TEXT   NOT NULL DEFAULT '',
	evidence     JSONB  NOT NULL DEFAULT '{}',
	action       TEXT   NOT NULL,
	time         BIGINT NOT NULL
);

-- Serves a tenant's events newest first (GET /v1/events).
CREATE INDEX abuse_events_tenant ON abuse_events (tenant_id, seq);

-- Tenants refused new runs and sessions until an operator lifts it.
CREATE TABLE tenant_quarantine (
	tenant_id TEXT   PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
	reason    TEXT   NOT NULL DEFAULT '',
	event_id  TEXT   NOT NULL DEFAULT '',
	since     BIGINT NOT NULL
);
