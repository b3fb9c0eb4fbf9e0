-- In a fleet a template's archive is in the object store: the digest a
-- node that pulls it checks the object against.
ALTER TABLE templates ADD COLUMN blob_digest TEXT NOT NULL DEFAULT '';
