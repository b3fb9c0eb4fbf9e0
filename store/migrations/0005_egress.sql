-- Egress: the audit log of every connection, DNS query and broker call of
-- a sandbox with a network, and the broker scopes a session holds. Times
-- are UTC nanoseconds since the Unix epoch.

CREATE TABLE egress_events (
	seq          {{serial}}, -- the cursor: increasing, never reused
	tenant_id    TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	session_id   TEXT    NOT NULL DEFAULT '',
	execution_id TEXT    NOT NULL DEFAULT '',
	time         {{int}} NOT NULL,
	kind         TEXT    NOT NULL,
	protocol     TEXT    NOT NULL DEFAULT '',
	name         TEXT    NOT NULL DEFAULT '',
	port         INTEGER NOT NULL DEFAULT 0,
	sni          TEXT    NOT NULL DEFAULT '',
	host         TEXT    NOT NULL DEFAULT '',
	dialled      TEXT    NOT NULL DEFAULT '',
	resolved     TEXT    NOT NULL DEFAULT '',
	bytes_up     {{int}} NOT NULL DEFAULT 0,
	bytes_down   {{int}} NOT NULL DEFAULT 0,
	verdict      TEXT    NOT NULL,
	reason       TEXT    NOT NULL DEFAULT '',
	flags        TEXT    NOT NULL DEFAULT '', -- comma-separated
	detail       TEXT    NOT NULL DEFAULT '',
	duration_ms  {{int}} NOT NULL DEFAULT 0
);

-- Serve the log of one session or one execution, newest first.
CREATE INDEX egress_events_session ON egress_events (tenant_id, session_id, seq) WHERE session_id != '';
CREATE INDEX egress_events_execution ON egress_events (tenant_id, execution_id, seq) WHERE execution_id != '';

ALTER TABLE sessions ADD COLUMN broker_scopes {{json}} NOT NULL DEFAULT '[]'; -- JSON array of scope names
