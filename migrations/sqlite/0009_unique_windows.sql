-- Uniqueness over a time window: an enqueue with `unique_for_ms` takes its idempotency key
-- here for that long, so a producer that retries after the first job finished (or died) gets
-- that job's id back instead of a second job. The hot pillar's unique index still enforces
-- "one active job per key"; this table answers for the finished pillars.
--
-- A key names the job that took it and the finished states that keep it taken. A job's rows
-- leave the archive and the DLQ by retention, by an operator's purge or by resurrection; the
-- triggers below copy the state the row was in, so a key keeps answering for its whole
-- window even after the job itself is gone. (A resurrected job is back in the hot pillar,
-- which the enqueue checks first.) Expired keys are deleted by the retention sweep.
CREATE TABLE unique_keys (
    key              TEXT    NOT NULL PRIMARY KEY,
    job_id           TEXT    NOT NULL,
    -- Microseconds: the key is free from then on.
    held_until       INTEGER NOT NULL,
    holds_succeeded  INTEGER NOT NULL,
    holds_dead       INTEGER NOT NULL,
    -- 1 succeeded, 2 dead: where the job was when its row left a finished pillar.
    left_state       INTEGER
) WITHOUT ROWID;

CREATE INDEX unique_keys_held_until ON unique_keys (held_until);

CREATE TRIGGER archive_leaves_unique_key AFTER DELETE ON archive
WHEN old.idempotency_key IS NOT NULL BEGIN
    UPDATE unique_keys SET left_state = 1
    WHERE key = old.idempotency_key AND job_id = old.id;
END;

CREATE TRIGGER dlq_leaves_unique_key AFTER DELETE ON dlq
WHEN old.idempotency_key IS NOT NULL BEGIN
    UPDATE unique_keys SET left_state = 2
    WHERE key = old.idempotency_key AND job_id = old.id;
END;
