-- Tenant quotas: the operator's overrides of the defaults airlockd is
-- started with, per tenant and quota (-1 is no limit), and the daily
-- counters of what each tenant's sandboxes used (UTC days, "2006-01-02"),
-- which airlockd adds to as sandboxes end and every few seconds while
-- they live, so that a daily quota survives a restart.

CREATE TABLE tenant_quotas (
	tenant_id  TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	quota      TEXT    NOT NULL,
	limit_val  INTEGER NOT NULL CHECK (limit_val >= -1),
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, quota)
);

CREATE TABLE tenant_usage (
	tenant_id    TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	day          TEXT    NOT NULL,
	sandbox_ms   INTEGER NOT NULL DEFAULT 0,
	egress_bytes INTEGER NOT NULL DEFAULT 0,
	updated_at   INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, day)
);

-- Serves DailyUsage (every tenant of one day).
CREATE INDEX tenant_usage_day ON tenant_usage (day);
