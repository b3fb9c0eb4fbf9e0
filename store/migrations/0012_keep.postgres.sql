-- A session may be paused: its sandbox saved to disk on its node and
-- gone, to be resumed later. The state's CHECK constraint gains 'paused'.
ALTER TABLE sessions DROP CONSTRAINT sessions_state_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_state_check
	CHECK (state IN ('creating', 'ready', 'busy', 'destroying', 'destroyed', 'failed', 'paused'));
