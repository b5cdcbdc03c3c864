-- Claims (SQLite): a reviewer holds a pending task for a while, so two people do not read the
-- same one. One row per task: the holder and until when (unix ms). A row whose `until_at` has
-- passed, or whose task is no longer pending, holds nothing; it is taken over by the next claim
-- (a conditional upsert, so two reviewers racing get one winner).
CREATE TABLE claims (
    task_id    TEXT PRIMARY KEY REFERENCES tasks (id),
    reviewer   TEXT NOT NULL,
    claimed_at BIGINT NOT NULL,
    until_at   BIGINT NOT NULL
);
