-- What the E2B-compatible API (package e2b) keeps about the sessions it
-- made or opened: E2B's template name, metadata and environment, and the
-- default code contexts of the code interpreter. Times are UTC
-- nanoseconds since the Unix epoch.
CREATE TABLE e2b_sandboxes (
	sandbox_id  TEXT    PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
	tenant_id   TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	template_id TEXT    NOT NULL,
	metadata    TEXT    NOT NULL DEFAULT '{}', -- JSON object of strings
	env_vars    TEXT    NOT NULL DEFAULT '{}', -- JSON object of strings
	contexts    TEXT    NOT NULL DEFAULT '{}', -- JSON object: language -> context ID
	created_at  INTEGER NOT NULL
);
