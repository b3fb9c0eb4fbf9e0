-- The state's CHECK constraint gains 'lost'.
ALTER TABLE sessions DROP CONSTRAINT sessions_state_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_state_check
	CHECK (state IN ('creating', 'ready', 'busy', 'destroying', 'destroyed', 'failed', 'paused', 'lost'));
