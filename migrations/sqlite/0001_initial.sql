-- The Deck, embedded SQLite store: initial schema.
--
-- Times are INTEGER microseconds since the Unix epoch (UTC). Job ids are UUID v7 in their
-- lower-case text form, which sorts like the UUID itself (by creation time).
-- Tags are stored as ',a,b,' (empty string for none) so "has tag x" is an exact
-- instr(tags, ',x,') match.
-- Column order matters: small, filterable columns first and the large JSON texts
-- (errors, payload, result) last, so scans that only read the front of a row never
-- follow overflow pages.

-- Hot pillar: pending (0), fetched (1) and processing (2) jobs.
CREATE TABLE jobs (
    id               TEXT    NOT NULL PRIMARY KEY,
    queue            TEXT    NOT NULL,
    job_type         TEXT    NOT NULL,
    priority         INTEGER NOT NULL,
    tags             TEXT    NOT NULL,
    status           INTEGER NOT NULL,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER,
    created_at       INTEGER NOT NULL,
    scheduled_at     INTEGER NOT NULL,
    started_at       INTEGER,
    heartbeat_at     INTEGER,
    fetched_at       INTEGER,
    expires_at       INTEGER,
    worker_id        TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    idempotency_key  TEXT,
    correlation_id   TEXT,
    created_by       TEXT,
    last_error       TEXT,
    continuation     TEXT,
    errors           TEXT,
    original_payload TEXT,
    payload          TEXT    NOT NULL
);

-- The claim reads pending rows of one queue in exactly this order (see claim_batch).
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, scheduled_at, id) WHERE status = 0;
-- In-flight rows: per-queue counts for the bulkhead and the stats, and the rescue sweep's
-- stale fetched rows and expired heartbeats. One index per status (not one over both)
-- so each transition touches as few index entries as possible.
CREATE INDEX jobs_fetched ON jobs (queue, fetched_at) WHERE status = 1;
CREATE INDEX jobs_processing ON jobs (queue, heartbeat_at) WHERE status = 2;
-- Rescue: pending jobs that carry a deadline.
CREATE INDEX jobs_expiry ON jobs (expires_at) WHERE status = 0 AND expires_at IS NOT NULL;
-- Idempotent enqueue: a key is held by at most one active job.
CREATE UNIQUE INDEX jobs_idempotency ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Archive pillar: succeeded jobs.
CREATE TABLE archive (
    id               TEXT    NOT NULL PRIMARY KEY,
    queue            TEXT    NOT NULL,
    job_type         TEXT    NOT NULL,
    priority         INTEGER NOT NULL,
    tags             TEXT    NOT NULL,
    attempt          INTEGER NOT NULL,
    max_attempts     INTEGER,
    created_at       INTEGER NOT NULL,
    scheduled_at     INTEGER NOT NULL,
    started_at       INTEGER,
    heartbeat_at     INTEGER,
    finished_at      INTEGER NOT NULL,
    duration_ms      INTEGER,
    expires_at       INTEGER,
    worker_id        TEXT,
    idempotency_key  TEXT,
    correlation_id   TEXT,
    created_by       TEXT,
    last_error       TEXT,
    continuation     TEXT,
    errors           TEXT,
    original_payload TEXT,
    payload          TEXT    NOT NULL,
    result           TEXT
);

-- Keyset paging for the console's filters and sorts (sort value, id).
CREATE INDEX archive_finished ON archive (finished_at, id);
CREATE INDEX archive_queue_finished ON archive (queue, finished_at, id);
CREATE INDEX archive_type_finished ON archive (job_type, finished_at, id);
CREATE INDEX archive_created ON archive (created_at, id);

-- Dead-letter pillar.
CREATE TABLE dlq (
    id               TEXT    NOT NULL PRIMARY KEY,
    queue            TEXT    NOT NULL,
    job_type         TEXT    NOT NULL,
    priority         INTEGER NOT NULL,
    tags             TEXT    NOT NULL,
    reason           INTEGER NOT NULL,
    attempt          INTEGER NOT NULL,
    max_attempts     INTEGER,
    created_at       INTEGER NOT NULL,
    scheduled_at     INTEGER NOT NULL,
    started_at       INTEGER,
    heartbeat_at     INTEGER,
    finished_at      INTEGER NOT NULL,
    duration_ms      INTEGER,
    expires_at       INTEGER,
    worker_id        TEXT,
    idempotency_key  TEXT,
    correlation_id   TEXT,
    created_by       TEXT,
    -- First 80 characters of the last error: with `reason`, the key of dlq_error_groups.
    error_prefix     TEXT    NOT NULL,
    last_error       TEXT,
    continuation     TEXT,
    errors           TEXT,
    original_payload TEXT,
    payload          TEXT    NOT NULL
);

CREATE INDEX dlq_finished ON dlq (finished_at, id);
CREATE INDEX dlq_queue_finished ON dlq (queue, finished_at, id);
CREATE INDEX dlq_type_finished ON dlq (job_type, finished_at, id);
CREATE INDEX dlq_reason_finished ON dlq (reason, finished_at, id);
CREATE INDEX dlq_created ON dlq (created_at, id);

-- Queue settings; a row is created on a queue's first enqueue.
CREATE TABLE queues (
    name                   TEXT    NOT NULL PRIMARY KEY,
    paused                 INTEGER NOT NULL DEFAULT 0,
    hidden                 INTEGER NOT NULL DEFAULT 0,
    max_workers            INTEGER,
    zombie_timeout_secs    INTEGER,
    execution_timeout_secs INTEGER,
    lag_warn_secs          INTEGER,
    lag_crit_secs          INTEGER,
    updated_at             INTEGER
) WITHOUT ROWID;

-- Rows per queue in the archive and the DLQ, maintained by every transition that moves,
-- purges or prunes rows, so the console never counts the big tables.
CREATE TABLE queue_counters (
    queue        TEXT    NOT NULL PRIMARY KEY,
    archive_rows INTEGER NOT NULL DEFAULT 0,
    dlq_rows     INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Finished work per queue and minute (minute = start of the minute, microseconds).
CREATE TABLE metric_buckets (
    queue           TEXT    NOT NULL,
    minute          INTEGER NOT NULL,
    succeeded       INTEGER NOT NULL DEFAULT 0,
    failed          INTEGER NOT NULL DEFAULT 0,
    retried         INTEGER NOT NULL DEFAULT 0,
    duration_sum_ms INTEGER NOT NULL DEFAULT 0,
    duration_max_ms INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, minute)
) WITHOUT ROWID;

CREATE INDEX metric_buckets_minute ON metric_buckets (minute);

-- DLQ rows grouped by (reason, error prefix), maintained on every DLQ insert and delete.
CREATE TABLE dlq_error_groups (
    reason    INTEGER NOT NULL,
    prefix    TEXT    NOT NULL,
    count     INTEGER NOT NULL,
    last_seen INTEGER NOT NULL,
    PRIMARY KEY (reason, prefix)
) WITHOUT ROWID;

CREATE INDEX dlq_error_groups_count ON dlq_error_groups (count DESC);

-- Engine-wide settings as JSON documents.
CREATE TABLE settings (
    key        TEXT    NOT NULL PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE instances (
    id            TEXT    NOT NULL PRIMARY KEY,
    host          TEXT    NOT NULL,
    pid           INTEGER NOT NULL,
    version       TEXT    NOT NULL,
    started_at    INTEGER NOT NULL,
    heartbeat_at  INTEGER NOT NULL,
    workers_total INTEGER NOT NULL,
    workers_busy  INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE audit_log (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER NOT NULL,
    actor  TEXT    NOT NULL,
    action TEXT    NOT NULL,
    target TEXT    NOT NULL,
    count  INTEGER NOT NULL,
    detail TEXT
);

CREATE INDEX audit_log_at ON audit_log (at);
