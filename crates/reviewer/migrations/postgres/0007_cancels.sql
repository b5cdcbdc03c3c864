-- Cancels only from the runner that asked (PostgreSQL): a task keeps the broker user that
-- published its request (`requested_by`, read from the task's body when it is stored; '' when
-- the request named none), and a withdrawn call is remembered per broker user that withdrew
-- it (`cancelled_by`), so a cancel withdraws, now or when it arrives, only a task of a call
-- that the same user asked for. Tasks and withdrawn calls stored before this step name no
-- user: older services dropped the field from the bodies they stored.
ALTER TABLE tasks ADD COLUMN requested_by TEXT NOT NULL DEFAULT '';
ALTER TABLE withdrawn ADD COLUMN cancelled_by TEXT NOT NULL DEFAULT '';
ALTER TABLE withdrawn DROP CONSTRAINT withdrawn_pkey;
ALTER TABLE withdrawn ADD PRIMARY KEY (correlation, cancelled_by);
