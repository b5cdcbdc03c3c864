-- Webhooks owed to the endpoints that page people (SQLite): written with the change they
-- announce, leased by one sender per attempt, kept as done once delivered, gone or given up.
CREATE TABLE webhooks (
    id           TEXT PRIMARY KEY,
    endpoint     TEXT NOT NULL,
    body         BLOB NOT NULL,
    created_at   BIGINT NOT NULL,
    next_attempt BIGINT NOT NULL,
    attempts     BIGINT NOT NULL,
    lease_until  BIGINT NOT NULL,
    done_at      BIGINT,
    outcome      TEXT
);
CREATE INDEX webhooks_due ON webhooks (next_attempt) WHERE done_at IS NULL;
