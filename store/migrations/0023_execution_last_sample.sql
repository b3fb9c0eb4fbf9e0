-- The last resource sample of a one-shot run ended by a limit (JSON of
-- airlock.MetricSample: at, cpu_pct, memory_bytes, disk_bytes, ...); ''
-- when none, and for executions recorded before.
ALTER TABLE executions ADD COLUMN last_sample TEXT NOT NULL DEFAULT '';
