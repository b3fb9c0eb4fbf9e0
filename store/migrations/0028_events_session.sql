-- The newest event of a session, which a start of the server compares
-- with the session's record to write what a crash lost
-- (LastSessionEvents).
CREATE INDEX events_session ON events (session_id, seq);
