-- The guard (issue 11): what it found in the code of each execution, as a
-- JSON array of findings ('[]' for none, and for executions recorded
-- before it existed); whether it refused the code (blocked: nothing ran);
-- and each tenant's guard policy ('' is the default, warn; off, warn or
-- block).
--
-- A refused execution is read back with status blocked. As in the SQLite
-- store (which cannot widen the CHECK on executions.status), the row
-- keeps status 'failed' (finished, not running) with blocked = true, so
-- the two stores hold the same rows.
ALTER TABLE executions ADD COLUMN findings JSONB NOT NULL DEFAULT '[]';
ALTER TABLE executions ADD COLUMN blocked BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE tenants ADD COLUMN guard TEXT NOT NULL DEFAULT '';
