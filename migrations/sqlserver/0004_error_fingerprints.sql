-- The Deck schema, version 4: dead letters are grouped by error fingerprint (reason, error
-- kind, job type and the message with numbers, ids, addresses, URLs and quoted values
-- masked; engine/src/fingerprint.rs) instead of the exact first 80 characters, and each DLQ
-- row carries its fingerprint so "every dead letter of this group" is a seek.
--
-- A fingerprint is the first 8 bytes of SHA-256 over the UTF-16LE text head + job type, as
-- 16 lowercase hex digits: the engine computes the head, the statements finish the hash per
-- row with HASHBYTES. The message normalisation lives in Rust only, so rows written before
-- this version get a legacy fingerprint here: the hash of (reason, first 80 characters of
-- the last error, job type) — the grouping they had before, split by job type — and keep it
-- until they leave the DLQ. New dead letters group by the normalised message.
--
-- Statements naming the new column run through EXEC: a statement naming a column added
-- earlier in the same batch does not compile. CREATE INDEX is resolved when it runs.
ALTER TABLE [{schema}].[jobs_dlq] ADD
    [fingerprint] CHAR(16) COLLATE Latin1_General_100_BIN2 NULL;

CREATE NONCLUSTERED INDEX [IX_jobs_dlq_fingerprint] ON [{schema}].[jobs_dlq] ([fingerprint], [finished_at], [id])
    WITH (DATA_COMPRESSION = PAGE);

-- Per fingerprint and session slot, like the slots of 0002: concurrent moves of one group
-- update different rows; only the sum over the slots means anything. The descriptive
-- columns are the same in every slot of a group, except the sample, which follows the
-- latest row counted in on that slot.
CREATE TABLE [{schema}].[error_fingerprint_slots] (
    [fingerprint] CHAR(16)      COLLATE Latin1_General_100_BIN2 NOT NULL,
    [slot]        TINYINT       NOT NULL,
    [reason]      TINYINT       NOT NULL,
    [error_kind]  NVARCHAR(64)  NOT NULL,
    [job_type]    NVARCHAR(255) NOT NULL,
    [sample]      NVARCHAR(400) NOT NULL,
    [dlq_rows]    BIGINT        NOT NULL,
    [last_seen]   DATETIME2(6)  NOT NULL,
    CONSTRAINT [PK_error_fingerprint_slots] PRIMARY KEY CLUSTERED ([fingerprint], [slot])
);

-- Backfill and seed under TABLOCK, HOLDLOCK on the DLQ: no writer moves a row in or out
-- until this transaction commits, so the seeded counts are exact.
EXEC(N'UPDATE d
SET d.fingerprint = LOWER(CONVERT(CHAR(16), CONVERT(BINARY(8), HASHBYTES(''SHA2_256'',
        CAST(N''legacy'' + NCHAR(31) + CAST(d.reason AS NVARCHAR(3)) + NCHAR(31)
             + ISNULL(LEFT(d.last_error, 80), N'''') + NCHAR(31) + d.job_type
             AS VARBINARY(MAX)))), 2))
FROM [{schema}].[jobs_dlq] AS d WITH (TABLOCK, HOLDLOCK)
WHERE d.fingerprint IS NULL;

INSERT INTO [{schema}].[error_fingerprint_slots]
    (fingerprint, slot, reason, error_kind, job_type, sample, dlq_rows, last_seen)
SELECT d.fingerprint, 0, MAX(d.reason), N'''', MAX(d.job_type), MAX(ISNULL(d.last_error, N'''')),
       COUNT_BIG(*), MAX(d.finished_at)
FROM [{schema}].[jobs_dlq] AS d WITH (TABLOCK, HOLDLOCK)
GROUP BY d.fingerprint;');

DROP TABLE [{schema}].[error_group_slots];
