-- A modify on a step that needs several approvals is one approval of the modified call (SQLite):
-- an approval keeps the arguments of the call it approves (NULL: the call as asked), and
-- only approvals of the same call count together.
ALTER TABLE approvals ADD COLUMN modified_arguments TEXT;
