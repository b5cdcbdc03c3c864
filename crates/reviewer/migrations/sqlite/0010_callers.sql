-- Callers apart (SQLite). A task is one per broker user that asked, call, kind and step: its
-- `dedup_key` starts with that user (`requested_by`, `%` and `/` percent-encoded) and a `/`,
-- so another user's request for the same call key is a task of its own. A standing decision
-- records whose calls it decides (the broker user and the tenant its task's key named) and
-- the policy (name and digest) they are decided by, and decides no other's. Those made before
-- this step recorded neither: they are revoked, rather than left to cross callers.
UPDATE tasks SET dedup_key = replace(replace(requested_by, '%', '%25'), '/', '%2F') || '/' || dedup_key;
ALTER TABLE standing ADD COLUMN requested_by TEXT NOT NULL DEFAULT '';
ALTER TABLE standing ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
ALTER TABLE standing ADD COLUMN policy_name TEXT;
ALTER TABLE standing ADD COLUMN policy_digest TEXT;
UPDATE standing SET revoked_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000,
    revoked_by = 'the schema upgrade (no caller or policy recorded)'
    WHERE revoked_at IS NULL;
