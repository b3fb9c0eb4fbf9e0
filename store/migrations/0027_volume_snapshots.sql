-- Volume snapshots: a volume's files at one moment, sealed under the
-- tenant's data key and kept in the blob store at blob_key. A snapshot
-- outlives its volume (no reference to volumes); volume is the name of
-- the volume it was taken of. Their bytes count with the workspace
-- snapshots' against the tenant's snapshot quota.
CREATE TABLE volume_snapshots (
	id         TEXT    PRIMARY KEY,
	tenant_id  TEXT    NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
	volume     TEXT    NOT NULL,
	name       TEXT    NOT NULL DEFAULT '',
	size_mib   {{int}} NOT NULL,
	bytes      {{int}} NOT NULL,
	sha256     TEXT    NOT NULL,
	entries    {{int}} NOT NULL,
	key_id     TEXT    NOT NULL,
	blob_key   TEXT    NOT NULL,
	node_id    TEXT    NOT NULL DEFAULT '',
	created_at {{int}} NOT NULL
);
CREATE INDEX volume_snapshots_tenant ON volume_snapshots (tenant_id, volume, created_at, id);
