-- Which backend runs each session's sandbox and how the sandbox was
-- obtained (pool, restore, cold): a restarted server reattaches the
-- sandbox on that backend, and the session's executions record both.
ALTER TABLE sessions ADD COLUMN backend TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN start_source TEXT NOT NULL DEFAULT '';
CREATE INDEX executions_session_running ON executions (session_id) WHERE status = 'running';
