-- Browser sessions (PostgreSQL), so that a restart or another process sharing the store
-- knows them. Only the SHA-256 of a session's id (the cookie's value) is stored; a logged-out
-- session stays, refused, until it expires and is pruned.
CREATE TABLE sessions (
    id_sha256     TEXT PRIMARY KEY,
    reviewer      TEXT NOT NULL,
    csrf          TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    logged_out_at BIGINT
);
CREATE INDEX sessions_expiry ON sessions (expires_at);
