-- How each execution's sandbox was obtained and the time of each phase
-- (a JSON object: phase -> milliseconds).
ALTER TABLE executions ADD COLUMN start_source TEXT NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN phases JSONB NOT NULL DEFAULT '{}';
