-- The audit log (as SQLite's 0017) of control-plane actions: who (key ID and name), what,
-- when, and the result. Entries outlive the keys and tenants they name.
CREATE TABLE audit_log (
	id        TEXT    PRIMARY KEY,
	at        BIGINT  NOT NULL,
	key_id    TEXT    NOT NULL,
	key_name  TEXT    NOT NULL DEFAULT '',
	role      TEXT    NOT NULL,
	tenant_id TEXT    NOT NULL DEFAULT '',
	action    TEXT    NOT NULL,
	target    TEXT    NOT NULL DEFAULT '',
	status    INTEGER NOT NULL,
	result    TEXT    NOT NULL,
	detail    TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_action ON audit_log (action, id);
