CREATE PROCEDURE [{schema}].[enqueue]
    @queue                 NVARCHAR(MAX),
    @job_type              NVARCHAR(MAX),
    @payload               NVARCHAR(MAX)     = NULL,
    @tags                  NVARCHAR(MAX)     = NULL,
    @priority              INT               = NULL,
    @scheduled_at          DATETIMEOFFSET(6) = NULL,
    @delay_ms              BIGINT            = NULL,
    @idempotency_key       NVARCHAR(MAX)     = NULL,
    @correlation_id        NVARCHAR(MAX)     = NULL,
    @created_by            NVARCHAR(MAX)     = NULL,
    @expires_at            DATETIMEOFFSET(6) = NULL,
    @max_attempts          INT               = NULL,
    @continuation_queue    NVARCHAR(MAX)     = NULL,
    @continuation_job_type NVARCHAR(MAX)     = NULL,
    @continuation_trigger  NVARCHAR(MAX)     = NULL,
    @unique_for_ms         BIGINT            = NULL,
    @unique_states         NVARCHAR(MAX)     = NULL,
    @trace_context         NVARCHAR(MAX)     = NULL
AS
BEGIN
    SET NOCOUNT ON;
    -- One job, every option of the API as a parameter (@tags and @unique_states: JSON
    -- arrays of strings; times: UTC when they carry no offset). The same checks, limits, transaction rules and
    -- answer as [enqueue_batch], which does the work: one row (id, created, ord).
    IF @tags IS NOT NULL
       AND (ISJSON(@tags) = 0 OR LEFT(TRIM(NCHAR(9) + NCHAR(10) + NCHAR(13) + N' ' FROM @tags), 1) <> N'[')
        THROW 51000, N'invalid tags: is not an array of strings (send e.g. ["billing", "eu"])', 1;
    IF @unique_states IS NOT NULL
       AND (ISJSON(@unique_states) = 0 OR LEFT(TRIM(NCHAR(9) + NCHAR(10) + NCHAR(13) + N' ' FROM @unique_states), 1) <> N'[')
        THROW 51000, N'invalid unique_states: is not an array of "active", "succeeded" and "dead" (send e.g. ["succeeded"])', 1;
    -- Times go as UTC without an offset (DATEPART(TZOFFSET, …): Babelfish has no SWITCHOFFSET
    -- and reads no offset from text); FOR JSON writes DATETIME2 as ISO 8601.
    DECLARE @scheduled_utc DATETIME2(6) =
        DATEADD(MINUTE, -DATEPART(TZOFFSET, @scheduled_at), CAST(@scheduled_at AS DATETIME2(6)));
    DECLARE @expires_utc DATETIME2(6) =
        DATEADD(MINUTE, -DATEPART(TZOFFSET, @expires_at), CAST(@expires_at AS DATETIME2(6)));
    DECLARE @jobs NVARCHAR(MAX) = (
        SELECT @queue AS [queue], @job_type AS job_type, @payload AS payload,
               @priority AS priority, @scheduled_utc AS scheduled_at,
               @delay_ms AS delay_ms, @idempotency_key AS idempotency_key,
               @correlation_id AS correlation_id, @created_by AS created_by,
               @expires_utc AS expires_at, @max_attempts AS max_attempts,
               @continuation_queue AS [continuation.queue],
               @continuation_job_type AS [continuation.job_type],
               @continuation_trigger AS [continuation.trigger],
               @unique_for_ms AS unique_for_ms, @trace_context AS trace_context
        FOR JSON PATH);
    -- The arrays go in as JSON, not as strings: JSON_MODIFY with JSON_QUERY (Babelfish quotes a
    -- JSON_QUERY column of FOR JSON as a string).
    IF @tags IS NOT NULL
        SET @jobs = JSON_MODIFY(@jobs, '$[0].tags', JSON_QUERY(@tags));
    -- A payload that is one JSON value goes in as the one element of an array, as deck sends
    -- it ([enqueue_batch], payload_in_array): Babelfish reads JSON escapes inside a string as
    -- text, so JSON text in a string would not parse there. Anything else stays text, for
    -- [enqueue_batch] to refuse with its message.
    IF ISJSON(N'[' + @payload + N']') = 1
       AND (SELECT COUNT(*) FROM OPENJSON(N'[' + @payload + N']')) = 1
        SET @jobs = JSON_MODIFY(@jobs, '$[0].payload_in_array', JSON_QUERY(N'[' + @payload + N']'));
    IF @unique_states IS NOT NULL
        SET @jobs = JSON_MODIFY(@jobs, '$[0].unique_states', JSON_QUERY(@unique_states));
    EXEC [{schema}].[enqueue_batch] @jobs = @jobs, @single = 1;
END
