-- Human tasks, the answers waiting to be sent, and withdrawn calls (PostgreSQL).
CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    dedup_key   TEXT NOT NULL UNIQUE,
    correlation TEXT NOT NULL,
    pool        TEXT NOT NULL,
    step        BIGINT NOT NULL,
    body        BYTEA NOT NULL,
    received_at BIGINT NOT NULL,
    deadline_at BIGINT NOT NULL,
    state       TEXT NOT NULL,
    decision    TEXT,
    explanation TEXT,
    decided_by  TEXT,
    decided_at  BIGINT,
    reason      TEXT
);
CREATE INDEX tasks_state ON tasks (state, received_at);
CREATE INDEX tasks_correlation ON tasks (correlation);
CREATE INDEX tasks_deadline ON tasks (deadline_at) WHERE state = 'pending' AND deadline_at > 0;

CREATE TABLE outbox (
    task_id     TEXT PRIMARY KEY REFERENCES tasks (id),
    correlation TEXT NOT NULL,
    body        BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    lease_until BIGINT NOT NULL,
    sent_at     BIGINT
);
CREATE INDEX outbox_unsent ON outbox (created_at) WHERE sent_at IS NULL;

CREATE TABLE withdrawn (
    correlation  TEXT PRIMARY KEY,
    withdrawn_at BIGINT NOT NULL,
    reason       TEXT NOT NULL
);
