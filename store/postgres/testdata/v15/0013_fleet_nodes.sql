-- A fleet: every session and execution names the node that runs it, so
-- a node's reconciler ends only its own, and the fleet's reaper marks a
-- lost node's sessions lost. '' is the node of a service without a
-- fleet (and of every record made before this migration).
ALTER TABLE sessions ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN node_id TEXT NOT NULL DEFAULT '';

-- The state's CHECK constraint gains 'lost'.
ALTER TABLE sessions DROP CONSTRAINT sessions_state_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_state_check
	CHECK (state IN ('creating', 'ready', 'busy', 'destroying', 'destroyed', 'failed', 'paused', 'lost'));

-- Live sessions, found by state, now also by node.
DROP INDEX sessions_live;
CREATE INDEX sessions_live ON sessions (node_id, state) WHERE state NOT IN ('destroyed', 'failed', 'lost');
CREATE INDEX executions_node_running ON executions (node_id) WHERE status = 'running';
