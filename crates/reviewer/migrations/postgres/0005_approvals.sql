-- The approvals of tasks whose step needs several reviewers (PostgreSQL): one row per task and
-- reviewer (a reviewer approves once), numbered in the order given. The approval that
-- completes the count decides the task in the same transaction.
CREATE TABLE approvals (
    task_id     TEXT NOT NULL REFERENCES tasks (id),
    reviewer    TEXT NOT NULL,
    ordinal     BIGINT NOT NULL,
    approved_at BIGINT NOT NULL,
    explanation TEXT NOT NULL,
    PRIMARY KEY (task_id, reviewer),
    UNIQUE (task_id, ordinal)
);
