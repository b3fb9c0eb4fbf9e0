-- Volumes: a tenant's named, size-capped disks that outlive sessions.
-- node_id is the fleet node that holds the volume's image ('' on a
-- single node).
CREATE TABLE volumes (
	tenant_id  TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	name       TEXT    NOT NULL,
	size_mib   {{int}} NOT NULL,
	node_id    TEXT    NOT NULL DEFAULT '',
	created_at {{int}} NOT NULL,
	PRIMARY KEY (tenant_id, name)
);

-- Which live session has which volume mounted. At most one writer per
-- volume: the partial unique index is the claim, so two nodes (or two
-- processes) racing for it cannot both win, and it survives a crash of
-- the process that took it until the session is found gone.
CREATE TABLE volume_claims (
	tenant_id  TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	volume     TEXT    NOT NULL,
	session_id TEXT    NOT NULL,
	path       TEXT    NOT NULL,
	read_only  {{bool}} NOT NULL DEFAULT {{false}},
	node_id    TEXT    NOT NULL DEFAULT '',
	mounted_at {{int}} NOT NULL,
	PRIMARY KEY (tenant_id, volume, session_id),
	-- No action: a mounted volume cannot be deleted (the check runs at
	-- the end of the statement, so deleting the tenant, which removes
	-- both, passes).
	FOREIGN KEY (tenant_id, volume) REFERENCES volumes (tenant_id, name)
);
CREATE UNIQUE INDEX volume_claims_writer ON volume_claims (tenant_id, volume) WHERE read_only = {{false}};
CREATE INDEX volume_claims_session ON volume_claims (session_id);
