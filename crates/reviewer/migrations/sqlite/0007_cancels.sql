-- Cancels only from the runner that asked (SQLite): a task keeps the broker user that
-- published its request (`requested_by`, read from the task's body when it is stored; '' when
-- the request named none), and a withdrawn call is remembered per broker user that withdrew
-- it (`cancelled_by`), so a cancel withdraws, now or when it arrives, only a task of a call
-- that the same user asked for. Tasks and withdrawn calls stored before this step name no
-- user: older services dropped the field from the bodies they stored. SQLite cannot change a
-- primary key, so `withdrawn` is made again.
ALTER TABLE tasks ADD COLUMN requested_by TEXT NOT NULL DEFAULT '';
CREATE TABLE withdrawn_by (
    correlation  TEXT NOT NULL,
    cancelled_by TEXT NOT NULL,
    withdrawn_at BIGINT NOT NULL,
    reason       TEXT NOT NULL,
    PRIMARY KEY (correlation, cancelled_by)
);
INSERT INTO withdrawn_by (correlation, cancelled_by, withdrawn_at, reason)
    SELECT correlation, '', withdrawn_at, reason FROM withdrawn;
DROP TABLE withdrawn;
ALTER TABLE withdrawn_by RENAME TO withdrawn;
