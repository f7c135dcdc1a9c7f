-- The Deck schema, version 8: rate limits. At most [max_starts] job starts of a queue per
-- [period_secs], across every instance. One row per limited queue holds the setting and the
-- current period's count; the claim reads it under UPDLOCK (after the queue rows, before the
-- jobs: the lock order of 0002) and adds what it took in the same transaction, so two
-- claimers never both spend the last start. Periods are aligned to the Unix epoch:
-- [window_start] is the period's start in Unix seconds; a claim in a later period counts from
-- zero. The conventions of 0001 hold.
--
-- Only creates a table; older processes neither read nor write it (and do not honour the
-- limits: upgrade every instance before setting one).
CREATE TABLE [{schema}].[rate_limits] (
    [queue]         NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [max_starts]    INT           NOT NULL,
    [period_secs]   INT           NOT NULL,
    [window_start]  BIGINT        NOT NULL,
    [window_starts] BIGINT        NOT NULL,
    CONSTRAINT [PK_rate_limits] PRIMARY KEY CLUSTERED ([queue])
);
