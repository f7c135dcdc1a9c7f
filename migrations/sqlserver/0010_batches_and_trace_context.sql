-- The Deck schema, version 10: batches with callbacks, and the trace context a job carries
-- from the span that enqueued it. The conventions of 0001, 0002 and 0007 hold: one batch,
-- one transaction; CREATE INDEX naming a column added above
-- is resolved when it runs (as in 0004).
--
-- Every pillar gets [batch_id] (the batch a job is a member of; NULL for most jobs) and
-- [trace_context] (W3C traceparent, optionally ";" and a tracestate; at most 1024 characters,
-- the store refuses longer text). Every move between pillars copies both.
--
-- [batches] keeps a batch's members' counts, moved in the transaction of each member's final
-- move (success, dead letter, cancel, zombie or expiry rescue): [total] members (a purged
-- pending member leaves the batch), [succeeded] and [dead] of them finished. [finished_at] is
-- set while every member is final and cleared when an operator resurrects a dead member (the
-- batch reopens). After moving its rows, the move first UPDATEs the counts: that exclusive
-- row lock, held to commit, makes two transactions that finish members of one batch take
-- turns, and the second reads what the first committed. Each then enqueues the callbacks its
-- new counts make due whose [*_job_id] is still NULL, setting it under an IS NULL guard:
-- each callback fires at most once. Moves of jobs that are no batch's members skip all of it
-- (they learn so from their own OUTPUT rows, in the same round trip).
--
-- [callbacks] is the document the engine wrote (read back by the console); [*_request] is
-- the job each callback enqueues, built by the engine when the batch is created
-- (`Batch::callback_job`), whose payload's counts ("total", "succeeded", "dead") the move
-- fills in. Their queues get their settings rows when the batch is created, so a move never
-- locks a queue row after jobs. Which callbacks are due (`Batch::due_callbacks`) is decided
-- by the move's own statement: deciding in the engine would hold the move's transaction open
-- across round trips (with its counter, metric and error-group locks), and a parameterised
-- batch that leaves a transaction open fails with error 266.
--
-- How enqueue stores the new columns:
-- * trace_context: [enqueue_batch] and [enqueue] (routines/) read it from each
--   request (it is part of the public request format from this version on). The other way,
--   an UPDATE of the rows just written in the same batch, was rejected: it costs a second
--   write of every new row whenever tracing is on (then nearly every enqueue carries a
--   context), and the INSERT ... EXEC it needs puts the store's enqueues inside an outer
--   transaction, where [enqueue_batch] writes the counter slots 16-31 that belong to
--   applications' own, possibly long, transactions.
-- * batch_id is not a request field: a job named into a batch without being counted in it
--   would make the counts wrong for good. Creating a batch writes its members through
--   [enqueue_batch] and sets their [batch_id] in the same transaction; enqueues without a
--   batch pay nothing.
--
-- Upgrading: adding the nullable columns changes metadata only; each new filtered index is
-- built by one scan of its table under this transaction. Older processes neither read nor
-- write the new columns and tables: a job they move loses its trace context and batch, and a
-- batch member they finish is not counted. Upgrade every instance before creating batches.
ALTER TABLE [{schema}].[jobs_hot] ADD
    [batch_id]      BINARY(16)     NULL;
ALTER TABLE [{schema}].[jobs_hot] ADD
    [trace_context] NVARCHAR(1024) NULL;
ALTER TABLE [{schema}].[jobs_archive] ADD
    [batch_id]      BINARY(16)     NULL;
ALTER TABLE [{schema}].[jobs_archive] ADD
    [trace_context] NVARCHAR(1024) NULL;
ALTER TABLE [{schema}].[jobs_dlq] ADD
    [batch_id]      BINARY(16)     NULL;
ALTER TABLE [{schema}].[jobs_dlq] ADD
    [trace_context] NVARCHAR(1024) NULL;

-- A batch page lists its members wherever they are: per pillar, a seek in id order.
CREATE NONCLUSTERED INDEX [IX_jobs_hot_batch] ON [{schema}].[jobs_hot] ([batch_id], [id])
    WHERE [batch_id] IS NOT NULL;
CREATE NONCLUSTERED INDEX [IX_jobs_archive_batch] ON [{schema}].[jobs_archive] ([batch_id], [id])
    WHERE [batch_id] IS NOT NULL WITH (DATA_COMPRESSION = PAGE);
CREATE NONCLUSTERED INDEX [IX_jobs_dlq_batch] ON [{schema}].[jobs_dlq] ([batch_id], [id])
    WHERE [batch_id] IS NOT NULL WITH (DATA_COMPRESSION = PAGE);

-- Ids are UUID v7 in RFC byte order, like job ids: newest first is a backward scan of the key.
CREATE TABLE [{schema}].[batches] (
    [id]               BINARY(16)     NOT NULL,
    [description]      NVARCHAR(2000) NULL,
    [created_by]       NVARCHAR(255)  NULL,
    [created_at]       DATETIME2(6)   NOT NULL,
    [total]            INT            NOT NULL,
    [succeeded]        INT            NOT NULL,
    [dead]             INT            NOT NULL,
    [finished_at]      DATETIME2(6)   NULL,
    [callbacks]        NVARCHAR(MAX)  NOT NULL,
    [success_request]  NVARCHAR(MAX)  NULL,
    [complete_request] NVARCHAR(MAX)  NULL,
    [death_request]    NVARCHAR(MAX)  NULL,
    [success_job_id]   BINARY(16)     NULL,
    [complete_job_id]  BINARY(16)     NULL,
    [death_job_id]     BINARY(16)     NULL,
    CONSTRAINT [PK_batches] PRIMARY KEY CLUSTERED ([id])
);
-- Retention deletes finished batches oldest first.
CREATE NONCLUSTERED INDEX [IX_batches_finished] ON [{schema}].[batches] ([finished_at])
    WHERE [finished_at] IS NOT NULL;
