-- Canaries (PostgreSQL): known-bad calls the service plants among a pool's real tasks. A canary is
-- a task like any other (same columns, same pending list, same webhooks); only `canary` (1)
-- marks it, and no reviewer-facing view reads that column. Its row in `canaries` keeps its
-- name, why it is bad, the decisions that count as caught, and whom its verdict counts for: the
-- reviewer who decided it, or the author of the standing decision that did (NULL for a
-- deadline's verdict, and for approvals completing a count, each kept in `approvals`).
ALTER TABLE tasks ADD COLUMN canary BIGINT NOT NULL DEFAULT 0;
CREATE TABLE canaries (
    task_id     TEXT PRIMARY KEY REFERENCES tasks (id),
    name        TEXT NOT NULL,
    why         TEXT NOT NULL,
    expected    TEXT NOT NULL,
    planted_at  BIGINT NOT NULL,
    answered_by TEXT,
    standing_id BIGINT
);
CREATE INDEX canaries_planted ON canaries (planted_at);
