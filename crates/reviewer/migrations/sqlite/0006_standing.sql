-- Standing decisions (SQLite): a reviewer's answer to every call identical to one they
-- decided, in a pool, of one kind and step, within a sample, a run or the whole pool, until
-- it expires or is revoked. Every process sharing the store applies them; a revoked one
-- stays, for the record.
CREATE TABLE standing (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    author      TEXT NOT NULL,
    pool        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    step        BIGINT NOT NULL,
    scope       TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    sample_id   TEXT NOT NULL,
    pattern     TEXT NOT NULL,
    decision    TEXT NOT NULL,
    explanation TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    revoked_at  BIGINT,
    revoked_by  TEXT
);
CREATE INDEX standing_active ON standing (pool, expires_at) WHERE revoked_at IS NULL;
