-- Triage of the pending list (PostgreSQL): the columns a person filters on, read from the task's body
-- when it is stored (tasks stored before this step are filled in by the service when it
-- opens the store: their body is protobuf, which SQL cannot read), and indexes on the
-- pending tasks for each filter and order. `search` is the lowercased rendered call and its
-- arguments, matched as a substring.
ALTER TABLE tasks ADD COLUMN function TEXT;
ALTER TABLE tasks ADD COLUMN run_id TEXT;
ALTER TABLE tasks ADD COLUMN sample_id TEXT;
ALTER TABLE tasks ADD COLUMN search TEXT;
CREATE INDEX tasks_pending ON tasks (pool, received_at, id) WHERE state = 'pending';
CREATE INDEX tasks_pending_deadline ON tasks (pool, deadline_at, id) WHERE state = 'pending';
CREATE INDEX tasks_pending_function ON tasks (pool, function, received_at) WHERE state = 'pending';
CREATE INDEX tasks_pending_sample ON tasks (pool, run_id, sample_id, received_at) WHERE state = 'pending';
CREATE INDEX tasks_unindexed ON tasks (id) WHERE function IS NULL;
