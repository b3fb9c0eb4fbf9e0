-- Keys with names, roles, expiry, revocation and last use (as SQLite's
-- 0016). An operator key (role 'admin') belongs to no tenant.
ALTER TABLE api_keys ALTER COLUMN tenant_id DROP NOT NULL;
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'tenant' CHECK (role IN ('tenant', 'admin'));
ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
ALTER TABLE api_keys ADD COLUMN revoked_at BIGINT;
ALTER TABLE api_keys ADD COLUMN last_used_at BIGINT;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_tenant CHECK ((role = 'admin') = (tenant_id IS NULL));
