-- The guard (issue 11): what it found in the code of each execution, as a
-- JSON array of findings ('[]' for none, and for executions recorded
-- before it existed), and each tenant's guard policy ('' is the default,
-- warn; off, warn or block).
ALTER TABLE executions ADD COLUMN findings TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tenants ADD COLUMN guard TEXT NOT NULL DEFAULT '';
