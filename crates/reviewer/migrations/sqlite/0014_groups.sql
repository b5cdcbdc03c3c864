-- Grouped calls (SQLite): `call_group` is the identity of a task's call among identical calls
-- (a digest; '' for a task never grouped), read from its body when it is stored. Tasks stored
-- before this step are filled in by the service when it opens the store (NULL: not yet).
ALTER TABLE tasks ADD COLUMN call_group TEXT;
CREATE INDEX tasks_pending_group ON tasks (call_group, pool) WHERE state = 'pending';
