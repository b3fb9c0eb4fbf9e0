-- The W3C trace ID of the request that made an execution ('' when it was
-- not traced), so a record leads to its spans and log lines.
ALTER TABLE executions ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
