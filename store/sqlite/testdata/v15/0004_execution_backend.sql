-- Which backend ran each execution (gvisor, namespaces): its isolation
-- level is part of the record. Executions recorded before are ''.
ALTER TABLE executions ADD COLUMN backend TEXT NOT NULL DEFAULT '';
