-- Broker scopes granted to tenants: a session may name a scope only if
-- its tenant holds the grant, and the broker checks it again at every call.
CREATE TABLE broker_grants (
	tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	scope     TEXT NOT NULL,
	PRIMARY KEY (tenant_id, scope)
);
