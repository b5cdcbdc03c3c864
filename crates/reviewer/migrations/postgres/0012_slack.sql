-- Slack: the message posted for each task (its channel and `ts`, which `chat.update` needs
-- once the task is decided), and the interaction payloads already used (the SHA-256 of a
-- signed request), so a replayed button press decides nothing, even after a restart.
CREATE TABLE slack_messages (
    task_id   TEXT PRIMARY KEY,
    channel   TEXT NOT NULL,
    ts        TEXT NOT NULL,
    posted_at BIGINT NOT NULL
);
CREATE TABLE slack_payloads (
    id      TEXT PRIMARY KEY,
    used_at BIGINT NOT NULL
);
CREATE INDEX slack_payloads_used ON slack_payloads (used_at);
