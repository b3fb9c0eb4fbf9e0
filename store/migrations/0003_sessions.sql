-- Sessions: long-lived sandboxes of a tenant, and the idempotency keys of
-- their creation. Times are UTC nanoseconds since the Unix epoch.

CREATE TABLE sessions (
	id              TEXT     PRIMARY KEY,
	tenant_id       TEXT     NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	image           TEXT     NOT NULL,
	size            TEXT     NOT NULL,
	state           TEXT     NOT NULL CHECK (state IN ('creating', 'ready', 'busy', 'destroying', 'destroyed', 'failed')),
	limits          {{json}} NOT NULL DEFAULT '{}', -- JSON SessionLimits
	network         {{json}} NOT NULL DEFAULT '{}', -- JSON NetworkPolicy
	usage           {{json}} NOT NULL DEFAULT '{}', -- JSON SessionUsage
	idempotency_key TEXT     NOT NULL DEFAULT '',
	request_hash    TEXT     NOT NULL DEFAULT '',
	created_at      {{int}}  NOT NULL,
	expires_at      {{int}}  NOT NULL,
	last_active_at  {{int}}  NOT NULL,
	ended_at        {{int}},
	end_reason      TEXT     NOT NULL DEFAULT '',
	end_detail      TEXT     NOT NULL DEFAULT ''
);

-- Serves ListSessions (a tenant's rows newest first, keyset paginated).
CREATE INDEX sessions_tenant_created ON sessions (tenant_id, created_at, id);

-- Serves LiveSessions; only rows not yet ended are in it.
CREATE INDEX sessions_live ON sessions (state) WHERE state NOT IN ('destroyed', 'failed');

-- One row per tenant and key. The primary key is what makes concurrent
-- retries safe: exactly one insert wins, the others read the winner's row.
CREATE TABLE idempotency_keys (
	tenant_id    TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	key          TEXT    NOT NULL,
	request_hash TEXT    NOT NULL,
	session_id   TEXT    NOT NULL,
	created_at   {{int}} NOT NULL,
	expires_at   {{int}} NOT NULL,
	PRIMARY KEY (tenant_id, key)
);

CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
