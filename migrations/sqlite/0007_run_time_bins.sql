-- Run times per job type and minute, as counts per logarithmic bin (four per doubling; the
-- bin is computed in Rust, engine/src/telemetry.rs `run_time::bin_of`): the console's
-- p50 / p95 per job type over the last hour sums a few hundred of these rows instead of
-- reading the run times of every job archived in that hour. Written in the transaction
-- that moves a finished run to the archive or the DLQ, one upsert per (type, bin) and batch.
-- The minute leads the key: the hour's read and the retention's delete are one range each.
CREATE TABLE run_time_bins (
    minute   INTEGER NOT NULL,
    job_type TEXT    NOT NULL,
    bin      INTEGER NOT NULL,
    runs     INTEGER NOT NULL,
    PRIMARY KEY (minute, job_type, bin)
) WITHOUT ROWID;
