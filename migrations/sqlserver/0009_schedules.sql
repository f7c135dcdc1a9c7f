-- The Deck schema, version 9: recurring schedules. A schedule's definition (spec, time
-- zone, job template, misfire and overlap policies) is one JSON document the engine writes
-- and reads; the columns beside it are what the statements decide on. [handled_through] is
-- the schedulers' cursor: every occurrence up to it was run or skipped. [last_job_id] is the
-- last job enqueued (the overlap policy looks at it); [last_skipped] says the last run was
-- skipped instead.
--
-- [schedule_runs] holds one row per handled occurrence: its primary key (schedule,
-- scheduled time, manual) is what makes an occurrence one job across every instance. It is
-- written in the transaction that enqueues the job; [job_id] is NULL when the overlap policy
-- skipped the occurrence. The retention sweep deletes rows older than the archive's
-- retention; a schedule's last run stays on its own row.
--
-- Only creates tables; older processes neither read nor write them (and run no schedules).
CREATE TABLE [{schema}].[schedules] (
    [name]              NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [definition]        NVARCHAR(MAX) NOT NULL,
    [enabled]           BIT           NOT NULL,
    [origin]            NVARCHAR(20)  NOT NULL,
    [handled_through]   DATETIME2(6)  NOT NULL,
    [last_scheduled_at] DATETIME2(6)  NULL,
    [last_job_id]       BINARY(16)    NULL,
    [last_skipped]      BIT           NULL,
    [last_manual]       BIT           NULL,
    [last_recorded_at]  DATETIME2(6)  NULL,
    [created_at]        DATETIME2(6)  NOT NULL,
    [updated_at]        DATETIME2(6)  NOT NULL,
    CONSTRAINT [PK_schedules] PRIMARY KEY CLUSTERED ([name])
);
CREATE TABLE [{schema}].[schedule_runs] (
    [schedule]     NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [scheduled_at] DATETIME2(6)  NOT NULL,
    [manual]       BIT           NOT NULL,
    [job_id]       BINARY(16)    NULL,
    [recorded_at]  DATETIME2(6)  NOT NULL,
    CONSTRAINT [PK_schedule_runs] PRIMARY KEY CLUSTERED ([schedule], [scheduled_at], [manual])
);
CREATE NONCLUSTERED INDEX [IX_schedule_runs_recorded_at] ON [{schema}].[schedule_runs] ([recorded_at]);
