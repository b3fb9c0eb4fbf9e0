-- The backend's ID of each session's sandbox. A session whose sandbox
-- came from the warm pool runs in a sandbox named for the pool, not for
-- the session: a restarted server reattaches by this ID. Empty for
-- sessions recorded before it existed (their sandbox is "ss-" + id).
ALTER TABLE sessions ADD COLUMN sandbox_id TEXT NOT NULL DEFAULT '';
