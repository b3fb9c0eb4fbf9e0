-- The guard (issue 11): what it found in the code of each execution, as a
-- JSON array of findings ('[]' for none, and for executions recorded
-- before it existed); whether it refused the code (blocked: nothing ran);
-- and each tenant's guard policy ('' is the default, warn; off, warn or
-- block).
--
-- A refused execution is read back with status blocked. SQLite cannot
-- widen the CHECK on executions.status without rebuilding the table, and
-- dropping the old one would cascade into artifacts, so the row keeps
-- status 'failed' (finished, not running) with blocked true; PostgreSQL's
-- rows are the same.
ALTER TABLE executions ADD COLUMN findings {{json}} NOT NULL DEFAULT '[]';
ALTER TABLE executions ADD COLUMN blocked {{bool}} NOT NULL DEFAULT {{false}};
ALTER TABLE tenants ADD COLUMN guard TEXT NOT NULL DEFAULT '';
