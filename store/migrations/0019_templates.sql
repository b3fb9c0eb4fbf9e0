-- Templates: images made from OCI images, Dockerfiles or sessions. A
-- template belongs to a tenant, or to the operator (tenant_id ''), and
-- its name is unique per owner. The rootfs lives under the node's state
-- directory; this is its record. Credentials used to pull are never here.
CREATE TABLE templates (
	id          TEXT    PRIMARY KEY,
	tenant_id   TEXT    NOT NULL DEFAULT '',
	name        TEXT    NOT NULL,
	status      TEXT    NOT NULL CHECK (status IN ('building', 'ready', 'failed')),
	reason      TEXT    NOT NULL DEFAULT '',
	failed_line INTEGER NOT NULL DEFAULT 0,
	source      TEXT    NOT NULL,
	from_image  TEXT    NOT NULL DEFAULT '',
	context_id  TEXT    NOT NULL DEFAULT '',
	session_id  TEXT    NOT NULL DEFAULT '',
	digest      TEXT    NOT NULL DEFAULT '',
	image_hash  TEXT    NOT NULL DEFAULT '',
	size_bytes  {{int}}  NOT NULL DEFAULT 0,
	start_cmd   TEXT    NOT NULL DEFAULT '',
	ready_cmd   TEXT    NOT NULL DEFAULT '',
	env         TEXT    NOT NULL DEFAULT '[]',
	workdir     TEXT    NOT NULL DEFAULT '',
	run_user    TEXT    NOT NULL DEFAULT '',
	created_at  {{int}}  NOT NULL,
	ready_at    {{int}}
);
CREATE UNIQUE INDEX templates_owner_name ON templates (tenant_id, name);
CREATE INDEX sessions_image ON sessions (image);
