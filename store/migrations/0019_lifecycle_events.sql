-- Issue 25: a session's lifecycle (what its timeouts do), the size of a
-- paused session's saved sandbox, session events and webhooks with
-- their delivery queue. Times are UTC nanoseconds since the Unix epoch.

-- JSON SessionLifecycle: {"on_timeout": "end"|"pause", "auto_resume": bool}.
ALTER TABLE sessions ADD COLUMN lifecycle TEXT NOT NULL DEFAULT '';

-- Bytes the saved sandbox holds on its node (the paused storage quota).
ALTER TABLE session_pauses ADD COLUMN bytes {{int}} NOT NULL DEFAULT 0;

-- Events: session transitions and abuse decisions, read with a cursor
-- (the id; seq orders them) and delivered to webhooks.
CREATE TABLE events (
	seq        {{serial}}, -- the order: increasing, never reused
	id         TEXT     NOT NULL UNIQUE,
	tenant_id  TEXT     NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	session_id TEXT     NOT NULL DEFAULT '',
	type       TEXT     NOT NULL,
	reason     TEXT     NOT NULL DEFAULT '',
	detail     TEXT     NOT NULL DEFAULT '',
	data       {{json}} NOT NULL DEFAULT '{}',
	at         {{int}}  NOT NULL
);
CREATE INDEX events_tenant ON events (tenant_id, seq);

-- A tenant's webhooks. events is ",type,type," ('' for every type), so
-- one LIKE picks the webhooks of an event in both dialects. The secret
-- is sealed under the tenant's data key (key_id).
CREATE TABLE webhooks (
	id            TEXT      PRIMARY KEY,
	tenant_id     TEXT      NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	url           TEXT      NOT NULL,
	events        TEXT      NOT NULL DEFAULT '',
	sealed_secret {{bytes}} NOT NULL,
	key_id        TEXT      NOT NULL,
	created_at    {{int}}   NOT NULL
);
CREATE INDEX webhooks_tenant ON webhooks (tenant_id, created_at);

-- The delivery queue and log: one row per event and webhook. A node
-- claims a due row by moving lease_until past now (one node of a fleet
-- sends each try).
CREATE TABLE webhook_deliveries (
	seq          {{serial}},
	id           TEXT    NOT NULL UNIQUE,
	webhook_id   TEXT    NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
	tenant_id    TEXT    NOT NULL,
	event_id     TEXT    NOT NULL,
	event_type   TEXT    NOT NULL,
	state        TEXT    NOT NULL,
	attempts     {{int}} NOT NULL DEFAULT 0,
	last_status  {{int}} NOT NULL DEFAULT 0,
	last_error   TEXT    NOT NULL DEFAULT '',
	created_at   {{int}} NOT NULL,
	next_at      {{int}} NOT NULL,
	delivered_at {{int}},
	lease_until  {{int}} NOT NULL DEFAULT 0,
	lease_node   TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_at);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, seq);
