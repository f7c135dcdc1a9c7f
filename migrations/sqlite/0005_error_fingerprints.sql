-- Dead letters are grouped by error fingerprint (reason, error kind, job type and the message
-- with numbers, ids, addresses, URLs and quoted values masked) instead of the exact first 80
-- characters: ninety "mailbox … does not exist" failures are one group, not ninety.
-- The fingerprint is computed in Rust (engine/src/fingerprint.rs); SQL cannot normalise a
-- message. Existing rows are therefore backfilled, and the groups rebuilt from them, by the
-- store right after this script, in the same transaction (schema.rs).
ALTER TABLE dlq ADD COLUMN fingerprint TEXT;

-- "All dead letters of this group" (bulk resurrect or purge, the filtered list) seeks here.
CREATE INDEX dlq_fingerprint_finished ON dlq (fingerprint, finished_at);

DROP TABLE dlq_error_groups;
CREATE TABLE dlq_error_groups (
    fingerprint TEXT    NOT NULL PRIMARY KEY,
    reason      INTEGER NOT NULL,
    kind        TEXT    NOT NULL,
    job_type    TEXT    NOT NULL,
    -- The latest dead letter's message: what the console shows for the group.
    sample      TEXT    NOT NULL,
    count       INTEGER NOT NULL,
    last_seen   INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX dlq_error_groups_count ON dlq_error_groups (count DESC);
