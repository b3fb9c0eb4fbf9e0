-- Keys with names, roles, expiry, revocation and last use. An operator
-- key (role 'admin') belongs to no tenant, so tenant_id becomes nullable:
-- SQLite cannot drop a NOT NULL, so the table is rebuilt (nothing refers
-- to api_keys).
CREATE TABLE api_keys_new (
	id           TEXT    PRIMARY KEY,
	tenant_id    TEXT    REFERENCES tenants (id) ON DELETE CASCADE,
	hash         TEXT    NOT NULL UNIQUE,
	prefix       TEXT    NOT NULL,
	created_at   INTEGER NOT NULL,
	name         TEXT    NOT NULL DEFAULT '',
	role         TEXT    NOT NULL DEFAULT 'tenant' CHECK (role IN ('tenant', 'admin')),
	expires_at   INTEGER,
	revoked_at   INTEGER,
	last_used_at INTEGER,
	CHECK ((role = 'admin') = (tenant_id IS NULL))
);
INSERT INTO api_keys_new (id, tenant_id, hash, prefix, created_at)
	SELECT id, tenant_id, hash, prefix, created_at FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_new RENAME TO api_keys;
CREATE INDEX api_keys_tenant ON api_keys (tenant_id);
