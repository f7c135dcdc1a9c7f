-- The Deck schema, version 6: run times per job type and minute as counts per logarithmic
-- bin (four per doubling; the bin is computed by the engine, engine/src/telemetry.rs
-- `run_time::bin_of`, and sent with each completion). The console's p50 / p95 per job type
-- over the last hour sums these rows instead of reading the archive. Like the metric rows,
-- each session adds to its own slot (@@SPID % 16), so concurrent completions of one job
-- type do not queue on one row. The conventions of 0001 hold.
--
-- Only creates a table; older processes neither read nor write it.
CREATE TABLE [{schema}].[run_time_slots] (
    [bucket_start] DATETIME2(0)  NOT NULL,
    [job_type]     NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [bin]          SMALLINT      NOT NULL,
    [slot]         TINYINT       NOT NULL,
    [runs]         BIGINT        NOT NULL,
    CONSTRAINT [PK_run_time_slots] PRIMARY KEY CLUSTERED ([bucket_start], [job_type], [bin], [slot])
);
