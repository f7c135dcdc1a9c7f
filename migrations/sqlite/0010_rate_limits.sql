-- Rate limits: at most `max_starts` job starts of a queue per `period_secs`, across every
-- process on the file. One row per limited queue holds the setting and the current period's
-- count; the claim reads it and adds what it took inside the writer's transaction, so two
-- claimers never both spend the last start. Periods are aligned to the Unix epoch:
-- `window_start` is the start of the period `window_starts` counts (microseconds); a claim in
-- a later period starts counting from zero.
CREATE TABLE rate_limits (
    queue          TEXT    NOT NULL PRIMARY KEY,
    max_starts     INTEGER NOT NULL,
    period_secs    INTEGER NOT NULL,
    window_start   INTEGER NOT NULL DEFAULT 0,
    window_starts  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
