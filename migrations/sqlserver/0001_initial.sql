-- The Deck schema, version 1.
--
-- Conventions (read before changing anything):
-- * {schema} is replaced with the configured schema name, a validated identifier
--   (letters, digits, underscore; not starting with a digit; at most 128 characters).
-- * This file runs inside one transaction that holds the application lock
--   'deck:ddl:{schema}' and inside an IF block, so it must not contain GO separators and
--   every statement must be valid inside BEGIN ... END (CREATE SCHEMA is done by the caller).
-- * Job ids are UUID v7 stored as BINARY(16) in RFC 4122 byte order: they sort by creation
--   time, and the order SQL Server sees is the order the application sees (a
--   UNIQUEIDENTIFIER sorts by its last bytes first).
-- * Times are UTC, DATETIME2(6) (microseconds: the precision page cursors carry), written
--   from SYSUTCDATETIME() wherever they decide correctness (due, expiry, heartbeat age).
-- * Tags are stored as ',tag1,tag2,' so an exact tag test is CHARINDEX(',' + @tag + ',', tags).
-- * Queue names, type keys and idempotency keys use the binary collation
--   Latin1_General_100_BIN2: they are identifiers, compared exactly ('Emails' is not
--   'emails') and sorted by code point, as on every other backend, whatever the database's
--   default collation is. Statements give table variables and OPENJSON values the same
--   collation where they meet these columns.
-- * A move between pillars deletes from the source with OUTPUT ... INTO a table variable and
--   inserts from it, in one transaction; nothing else references these tables.

-- Hot pillar: pending, fetched and processing jobs. High churn, so the clustered key is an
-- ever-increasing BIGINT (inserts append, no page splits); the UUID is a nonclustered key.
CREATE TABLE [{schema}].[jobs_hot] (
    [seq]              BIGINT IDENTITY(1, 1) NOT NULL,
    [id]               BINARY(16)     NOT NULL,
    [queue]            NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    [job_type]         NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    [payload]          NVARCHAR(MAX)  NOT NULL,
    [tags]             NVARCHAR(1002) NOT NULL,
    [priority]         INT            NOT NULL,
    [idempotency_key]  NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NULL,
    [correlation_id]   NVARCHAR(255)  NULL,
    [created_by]       NVARCHAR(255)  NULL,
    [created_at]       DATETIME2(6)   NOT NULL,
    [scheduled_at]     DATETIME2(6)   NOT NULL,
    [fetched_at]       DATETIME2(6)   NULL,
    [started_at]       DATETIME2(6)   NULL,
    [heartbeat_at]     DATETIME2(6)   NULL,
    [expires_at]       DATETIME2(6)   NULL,
    [attempt]          INT            NOT NULL,
    [max_attempts]     INT            NULL,
    [status]           TINYINT        NOT NULL,
    [worker_id]        NVARCHAR(255)  NULL,
    [cancel_requested] BIT            NOT NULL,
    [errors]           NVARCHAR(MAX)  NULL,
    [last_error]       NVARCHAR(400)  NULL,
    [continuation]     NVARCHAR(MAX)  NULL,
    [original_payload] NVARCHAR(MAX)  NULL,
    CONSTRAINT [PK_jobs_hot] PRIMARY KEY CLUSTERED ([seq]),
    CONSTRAINT [CK_jobs_hot_status] CHECK ([status] IN (0, 1, 2))
);

CREATE UNIQUE NONCLUSTERED INDEX [UX_jobs_hot_id] ON [{schema}].[jobs_hot] ([id]);

-- The claim: per queue, pending rows in claim order. Filtered, so it holds only pending rows
-- and stays small however much work is fetched or processing.
CREATE NONCLUSTERED INDEX [IX_jobs_hot_claim] ON [{schema}].[jobs_hot]
    ([queue], [priority] DESC, [scheduled_at], [id])
    INCLUDE ([expires_at])
    WHERE [status] = 0;

-- Recovery and bulkhead counts: fetched rows (stale prefetch rescue) and processing rows
-- (zombie rescue), per queue.
CREATE NONCLUSTERED INDEX [IX_jobs_hot_fetched] ON [{schema}].[jobs_hot]
    ([queue], [fetched_at])
    INCLUDE ([worker_id])
    WHERE [status] = 1;

CREATE NONCLUSTERED INDEX [IX_jobs_hot_processing] ON [{schema}].[jobs_hot]
    ([queue], [heartbeat_at])
    INCLUDE ([worker_id])
    WHERE [status] = 2;

-- Idempotency: at most one active job per key.
CREATE UNIQUE NONCLUSTERED INDEX [UX_jobs_hot_idempotency] ON [{schema}].[jobs_hot]
    ([idempotency_key])
    WHERE [idempotency_key] IS NOT NULL;

-- Expiry sweep: pending rows that carry an expiry.
CREATE NONCLUSTERED INDEX [IX_jobs_hot_expiry] ON [{schema}].[jobs_hot]
    ([expires_at])
    WHERE [status] = 0 AND [expires_at] IS NOT NULL;

-- Console lists of active jobs (keyset paging: sort key, then id).
CREATE NONCLUSTERED INDEX [IX_jobs_hot_created] ON [{schema}].[jobs_hot] ([created_at], [id]);
CREATE NONCLUSTERED INDEX [IX_jobs_hot_scheduled] ON [{schema}].[jobs_hot] ([scheduled_at], [id]);
CREATE NONCLUSTERED INDEX [IX_jobs_hot_queue_created] ON [{schema}].[jobs_hot]
    ([queue], [created_at], [id]) INCLUDE ([status]);
CREATE NONCLUSTERED INDEX [IX_jobs_hot_status_created] ON [{schema}].[jobs_hot]
    ([status], [created_at], [id]);

-- Archive pillar: succeeded jobs. Append-mostly, pruned by age, read by the console.
CREATE TABLE [{schema}].[jobs_archive] (
    [seq]              BIGINT IDENTITY(1, 1) NOT NULL,
    [id]               BINARY(16)     NOT NULL,
    [queue]            NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    [job_type]         NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    [payload]          NVARCHAR(MAX)  NOT NULL,
    [tags]             NVARCHAR(1002) NOT NULL,
    [priority]         INT            NOT NULL,
    [idempotency_key]  NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NULL,
    [correlation_id]   NVARCHAR(255)  NULL,
    [created_by]       NVARCHAR(255)  NULL,
    [created_at]       DATETIME2(6)   NOT NULL,
    [scheduled_at]     DATETIME2(6)   NOT NULL,
    [started_at]       DATETIME2(6)   NULL,
    [heartbeat_at]     DATETIME2(6)   NULL,
    [finished_at]      DATETIME2(6)   NOT NULL,
    [expires_at]       DATETIME2(6)   NULL,
    [attempt]          INT            NOT NULL,
    [max_attempts]     INT            NULL,
    [worker_id]        NVARCHAR(255)  NULL,
    [errors]           NVARCHAR(MAX)  NULL,
    [last_error]       NVARCHAR(400)  NULL,
    [continuation]     NVARCHAR(MAX)  NULL,
    [original_payload] NVARCHAR(MAX)  NULL,
    [result]           NVARCHAR(MAX)  NULL,
    [duration_ms]      BIGINT         NULL,
    CONSTRAINT [PK_jobs_archive] PRIMARY KEY CLUSTERED ([seq]) WITH (DATA_COMPRESSION = PAGE)
);

CREATE UNIQUE NONCLUSTERED INDEX [UX_jobs_archive_id] ON [{schema}].[jobs_archive] ([id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_archive_finished] ON [{schema}].[jobs_archive] ([finished_at], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_archive_created] ON [{schema}].[jobs_archive] ([created_at], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_archive_scheduled] ON [{schema}].[jobs_archive] ([scheduled_at], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_archive_priority] ON [{schema}].[jobs_archive] ([priority], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_archive_attempt] ON [{schema}].[jobs_archive] ([attempt], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_archive_queue] ON [{schema}].[jobs_archive] ([queue], [finished_at], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_archive_type] ON [{schema}].[jobs_archive] ([job_type], [finished_at], [id])
    WITH (DATA_COMPRESSION = PAGE);

-- Dead-letter pillar. Same shape as the archive, with the failure reason instead of a result.
CREATE TABLE [{schema}].[jobs_dlq] (
    [seq]              BIGINT IDENTITY(1, 1) NOT NULL,
    [id]               BINARY(16)     NOT NULL,
    [queue]            NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    [job_type]         NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    [payload]          NVARCHAR(MAX)  NOT NULL,
    [tags]             NVARCHAR(1002) NOT NULL,
    [priority]         INT            NOT NULL,
    [idempotency_key]  NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NULL,
    [correlation_id]   NVARCHAR(255)  NULL,
    [created_by]       NVARCHAR(255)  NULL,
    [created_at]       DATETIME2(6)   NOT NULL,
    [scheduled_at]     DATETIME2(6)   NOT NULL,
    [started_at]       DATETIME2(6)   NULL,
    [heartbeat_at]     DATETIME2(6)   NULL,
    [finished_at]      DATETIME2(6)   NOT NULL,
    [expires_at]       DATETIME2(6)   NULL,
    [attempt]          INT            NOT NULL,
    [max_attempts]     INT            NULL,
    [worker_id]        NVARCHAR(255)  NULL,
    [errors]           NVARCHAR(MAX)  NULL,
    [last_error]       NVARCHAR(400)  NULL,
    [continuation]     NVARCHAR(MAX)  NULL,
    [original_payload] NVARCHAR(MAX)  NULL,
    [reason]           TINYINT        NOT NULL,
    [duration_ms]      BIGINT         NULL,
    CONSTRAINT [PK_jobs_dlq] PRIMARY KEY CLUSTERED ([seq]) WITH (DATA_COMPRESSION = PAGE)
);

CREATE UNIQUE NONCLUSTERED INDEX [UX_jobs_dlq_id] ON [{schema}].[jobs_dlq] ([id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_dlq_finished] ON [{schema}].[jobs_dlq] ([finished_at], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_dlq_created] ON [{schema}].[jobs_dlq] ([created_at], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_dlq_scheduled] ON [{schema}].[jobs_dlq] ([scheduled_at], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_dlq_priority] ON [{schema}].[jobs_dlq] ([priority], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_dlq_attempt] ON [{schema}].[jobs_dlq] ([attempt], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_dlq_queue] ON [{schema}].[jobs_dlq] ([queue], [finished_at], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_dlq_type] ON [{schema}].[jobs_dlq] ([job_type], [finished_at], [id])
    WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_dlq_reason] ON [{schema}].[jobs_dlq] ([reason], [finished_at], [id])
    WITH (DATA_COMPRESSION = PAGE);

-- Per-queue settings, shared by every instance. A row is created on a queue's first enqueue.
CREATE TABLE [{schema}].[queues] (
    [name]                   NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [paused]                 BIT           NOT NULL,
    [hidden]                 BIT           NOT NULL,
    [max_workers]            INT           NULL,
    [zombie_timeout_secs]    INT           NULL,
    [execution_timeout_secs] INT           NULL,
    [lag_warn_secs]          INT           NULL,
    [lag_crit_secs]          INT           NULL,
    [created_at]             DATETIME2(6)  NOT NULL,
    [updated_at]             DATETIME2(6)  NULL,
    CONSTRAINT [PK_queues] PRIMARY KEY CLUSTERED ([name])
);

-- The claim locks the settings rows of unpaused queues with a max_workers limit (so their
-- claimers take turns); reading them through this index locks only those rows.
CREATE NONCLUSTERED INDEX [IX_queues_limited] ON [{schema}].[queues] ([name])
    INCLUDE ([max_workers])
    WHERE [paused] = 0 AND [max_workers] IS NOT NULL;

-- Rows currently in the archive and the DLQ, per queue, kept by every transition so the
-- console never counts the big tables.
CREATE TABLE [{schema}].[queue_counters] (
    [queue]        NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [archive_rows] BIGINT        NOT NULL,
    [dlq_rows]     BIGINT        NOT NULL,
    CONSTRAINT [PK_queue_counters] PRIMARY KEY CLUSTERED ([queue])
);

-- Finished work per minute and queue.
CREATE TABLE [{schema}].[metric_buckets] (
    [bucket_start]    DATETIME2(0)  NOT NULL,
    [queue]           NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [succeeded]       BIGINT        NOT NULL,
    [failed]          BIGINT        NOT NULL,
    [retried]         BIGINT        NOT NULL,
    [duration_sum_ms] BIGINT        NOT NULL,
    [duration_max_ms] BIGINT        NOT NULL,
    CONSTRAINT [PK_metric_buckets] PRIMARY KEY CLUSTERED ([bucket_start], [queue])
);

-- DLQ rows grouped by reason and error prefix, kept by every transition into or out of the DLQ.
CREATE TABLE [{schema}].[error_groups] (
    [reason]         TINYINT      NOT NULL,
    [message_prefix] NVARCHAR(80) NOT NULL,
    [dlq_rows]       BIGINT       NOT NULL,
    [last_seen]      DATETIME2(6) NOT NULL,
    CONSTRAINT [PK_error_groups] PRIMARY KEY CLUSTERED ([reason], [message_prefix])
);
CREATE NONCLUSTERED INDEX [IX_error_groups_rows] ON [{schema}].[error_groups] ([dlq_rows] DESC);

-- Engine-wide settings (JSON documents by name).
CREATE TABLE [{schema}].[settings] (
    [name]       NVARCHAR(100) NOT NULL,
    [value]      NVARCHAR(MAX) NOT NULL,
    [updated_at] DATETIME2(6)  NOT NULL,
    CONSTRAINT [PK_settings] PRIMARY KEY CLUSTERED ([name])
);

-- Running engines and their heartbeats.
CREATE TABLE [{schema}].[instances] (
    [id]            NVARCHAR(255) NOT NULL,
    [host]          NVARCHAR(255) NOT NULL,
    [pid]           BIGINT        NOT NULL,
    [version]       NVARCHAR(100) NOT NULL,
    [started_at]    DATETIME2(6)  NOT NULL,
    [heartbeat_at]  DATETIME2(6)  NOT NULL,
    [workers_total] INT           NOT NULL,
    [workers_busy]  INT           NOT NULL,
    [stopped_at]    DATETIME2(6)  NULL,
    CONSTRAINT [PK_instances] PRIMARY KEY CLUSTERED ([id])
);
CREATE NONCLUSTERED INDEX [IX_instances_heartbeat] ON [{schema}].[instances] ([heartbeat_at]);

-- Who did what, when, to which jobs.
CREATE TABLE [{schema}].[audit_log] (
    [id]     BIGINT IDENTITY(1, 1) NOT NULL,
    [at]     DATETIME2(6)   NOT NULL,
    [actor]  NVARCHAR(255)  NOT NULL,
    [action] NVARCHAR(255)  NOT NULL,
    [target] NVARCHAR(4000) NOT NULL,
    [count]  BIGINT         NOT NULL,
    [detail] NVARCHAR(MAX)  NULL,
    CONSTRAINT [PK_audit_log] PRIMARY KEY CLUSTERED ([id])
);
CREATE NONCLUSTERED INDEX [IX_audit_log_at] ON [{schema}].[audit_log] ([at]);
