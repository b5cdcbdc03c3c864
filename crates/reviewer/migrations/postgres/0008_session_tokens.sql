-- Sessions end with their token (PostgreSQL): a session keeps the SHA-256 of the token it was
-- opened with (as the tokens file lists it), and is refused once the reviewer's token in the
-- tokens file is another. Sessions opened before this step name no token and are refused.
ALTER TABLE sessions ADD COLUMN token_sha256 TEXT NOT NULL DEFAULT '';
