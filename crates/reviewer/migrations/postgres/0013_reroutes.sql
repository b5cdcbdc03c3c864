-- Moves and warnings (PostgreSQL): when a pending task moves on to the next pool of its step's route
-- (`reroute_at`, unix ms) and when its pool is warned that it expires (`warn_at`), both read
-- from the task's body when it is stored; 0 for never. A warning sent sets `warn_at` to 0, so
-- it goes out once.
ALTER TABLE tasks ADD COLUMN reroute_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN warn_at BIGINT NOT NULL DEFAULT 0;
CREATE INDEX tasks_reroute ON tasks (reroute_at) WHERE state = 'pending' AND reroute_at > 0;
CREATE INDEX tasks_warn ON tasks (warn_at) WHERE state = 'pending' AND warn_at > 0;
