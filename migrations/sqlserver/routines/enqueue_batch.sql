CREATE PROCEDURE [{schema}].[enqueue_batch]
    @jobs NVARCHAR(MAX),
    @single BIT = 0
AS
BEGIN
    SET NOCOUNT ON;
    -- Enqueue the jobs of a JSON array, all or nothing, inside the caller's transaction if
    -- there is one (nothing commits until the caller commits) or in its own otherwise.
    -- Returns one row per job, in request order: id (UUID text), created (0 when an active
    -- job already held the idempotency key, or a finished job inside its uniqueness window
    -- did; id is then that job's), ord (0-based index).
    --
    -- Validation comes first, before XACT_ABORT, with the limits and messages of the deck
    -- API: a rejected request raises error 51000 and leaves the caller's transaction usable
    -- (unless the caller itself set XACT_ABORT ON). @single = 1 names fields without the
    -- jobs[i] prefix (the [enqueue] procedure passes it).
    --
    -- trace_context (version 10): the W3C trace context (traceparent, optionally ";" and a
    -- tracestate) of the span that enqueued the job, at most 1024 characters, stored as given.
    --
    -- Times: ISO 8601 with an offset, with Z, or without a zone (UTC), read by [utc_time].
    -- Ids in and out are canonical UUID text ([uuid_bytes], [uuid_text]).
    DECLARE @error NVARCHAR(2048);
    DECLARE @count INT;
    IF @jobs IS NULL OR ISJSON(@jobs) = 0
        THROW 51000, N'invalid jobs: is not a JSON array (send [{"queue": "...", "job_type": "...", "payload": "..."}])', 1;
    IF EXISTS (SELECT 1 FROM OPENJSON(@jobs) AS a WHERE TRY_CAST(a.[key] AS INT) IS NULL)
        THROW 51000, N'invalid jobs: is not a JSON array (send [{"queue": "...", "job_type": "...", "payload": "..."}])', 1;
    SET @count = (SELECT COUNT(*) FROM OPENJSON(@jobs));
    IF @count > 10000
    BEGIN
        SET @error = N'invalid jobs: holds ' + CAST(@count AS NVARCHAR(20))
            + N' jobs (send at most 10000 jobs per batch)';
        THROW 51000, @error, 1;
    END

    -- Control characters (Unicode Cc) and white space, as the API's checks define them.
    DECLARE @control NVARCHAR(20) = N'%[' + NCHAR(1) + N'-' + NCHAR(31) + NCHAR(127) + N'-' + NCHAR(159) + N']%';
    DECLARE @space NVARCHAR(40) = N'[ ' + NCHAR(160) + NCHAR(5760) + NCHAR(8192) + N'-' + NCHAR(8202)
        + NCHAR(8232) + NCHAR(8233) + NCHAR(8239) + NCHAR(8287) + NCHAR(12288) + N']';

    -- Everything as text first, so a wrong type is a clear message, not a conversion error.
    CREATE TABLE #input (
        ord               INT           NOT NULL PRIMARY KEY,
        prefix            NVARCHAR(30)  COLLATE DATABASE_DEFAULT NOT NULL,
        is_object         BIT           NOT NULL,
        id_text           NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        queue             NVARCHAR(MAX) COLLATE Latin1_General_100_BIN2 NULL,
        job_type          NVARCHAR(MAX) COLLATE Latin1_General_100_BIN2 NULL,
        payload_text      NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        payload_json      NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        payload_in_array  NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        tags_text         NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        tags_json         NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        priority_text     NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        idempotency_key   NVARCHAR(MAX) COLLATE Latin1_General_100_BIN2 NULL,
        correlation_id    NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        created_by        NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        scheduled_text    NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        delay_text        NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        expires_text      NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        max_attempts_text NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        continuation_text NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        continuation_json NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        cont_queue        NVARCHAR(MAX) COLLATE Latin1_General_100_BIN2 NULL,
        cont_job_type     NVARCHAR(MAX) COLLATE Latin1_General_100_BIN2 NULL,
        cont_trigger      NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        unique_for_text   NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        unique_states_text NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        unique_states_json NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        trace_text        NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        payload           NVARCHAR(MAX) COLLATE DATABASE_DEFAULT NULL,
        payload_problem   NVARCHAR(2048) COLLATE DATABASE_DEFAULT NULL,
        tags_problem      NVARCHAR(2048) COLLATE DATABASE_DEFAULT NULL,
        problem           NVARCHAR(2048) COLLATE DATABASE_DEFAULT NULL
    );

    INSERT INTO #input (ord, prefix, is_object, id_text, queue, job_type, payload_text, payload_json,
                        payload_in_array,
                        tags_text, tags_json, priority_text, idempotency_key, correlation_id,
                        created_by, scheduled_text, delay_text, expires_text, max_attempts_text,
                        continuation_text, continuation_json, cont_queue, cont_job_type,
                        cont_trigger, unique_for_text, unique_states_text, unique_states_json,
                        trace_text)
    SELECT CAST(a.[key] AS INT),
           CASE WHEN @single = 1 THEN N'' ELSE N'jobs[' + a.[key] + N'].' END,
           CASE WHEN a.[type] = 5 THEN 1 ELSE 0 END,
           j.id_text, j.queue, j.job_type, j.payload_text,
           -- JSON values through JSON_QUERY, not OPENJSON WITH: Babelfish cuts an
           -- NVARCHAR(MAX) column of OPENJSON WITH at 4,000 characters.
           CASE WHEN a.[type] = 5 THEN JSON_QUERY(a.[value], '$.payload') END,
           CASE WHEN a.[type] = 5 THEN JSON_QUERY(a.[value], '$.payload_in_array') END,
           j.tags_text,
           j.tags_json, j.priority_text, j.idempotency_key, j.correlation_id, j.created_by,
           j.scheduled_text, j.delay_text, j.expires_text, j.max_attempts_text,
           j.continuation_text, j.continuation_json, j.cont_queue, j.cont_job_type,
           j.cont_trigger, j.unique_for_text, j.unique_states_text, j.unique_states_json,
           j.trace_text
    FROM OPENJSON(@jobs) AS a
    OUTER APPLY (
        SELECT *
        FROM OPENJSON(CASE WHEN a.[type] = 5 THEN a.[value] ELSE N'{}' END) WITH (
            id_text           NVARCHAR(MAX) '$.id',
            queue             NVARCHAR(MAX) '$.queue',
            job_type          NVARCHAR(MAX) '$.job_type',
            payload_text      NVARCHAR(MAX) '$.payload',
            tags_text         NVARCHAR(MAX) '$.tags',
            tags_json         NVARCHAR(MAX) '$.tags' AS JSON,
            priority_text     NVARCHAR(MAX) '$.priority',
            idempotency_key   NVARCHAR(MAX) '$.idempotency_key',
            correlation_id    NVARCHAR(MAX) '$.correlation_id',
            created_by        NVARCHAR(MAX) '$.created_by',
            scheduled_text    NVARCHAR(MAX) '$.scheduled_at',
            delay_text        NVARCHAR(MAX) '$.delay_ms',
            expires_text      NVARCHAR(MAX) '$.expires_at',
            max_attempts_text NVARCHAR(MAX) '$.max_attempts',
            continuation_text NVARCHAR(MAX) '$.continuation',
            continuation_json NVARCHAR(MAX) '$.continuation' AS JSON,
            cont_queue        NVARCHAR(MAX) '$.continuation.queue',
            cont_job_type     NVARCHAR(MAX) '$.continuation.job_type',
            cont_trigger      NVARCHAR(MAX) '$.continuation.trigger',
            unique_for_text   NVARCHAR(MAX) '$.unique_for_ms',
            unique_states_text NVARCHAR(MAX) '$.unique_states',
            unique_states_json NVARCHAR(MAX) '$.unique_states' AS JSON,
            trace_text        NVARCHAR(MAX) '$.trace_context'
        )
    ) AS j;

    -- The payload: JSON text in a string, or the JSON value itself; empty means null. deck
    -- itself sends payload_in_array, the payload as the one element of an array: a JSON string
    -- payload ("hello") nested as a value keeps its quotes, and a string value's escapes are
    -- not read back on Babelfish (README, SQL Server), so JSON text in a string would not do.
    UPDATE #input
    SET payload = CASE
        WHEN payload_in_array IS NOT NULL AND LEFT(payload_in_array, 1) = N'['
            THEN SUBSTRING(payload_in_array, 2, LEN(payload_in_array) - 2)
        WHEN payload_json IS NOT NULL THEN payload_json
        WHEN payload_text IS NULL
          OR DATALENGTH(TRIM(NCHAR(9) + NCHAR(10) + NCHAR(13) + N' ' FROM payload_text)) = 0 THEN N'null'
        ELSE payload_text END;

    -- Size in UTF-8 bytes, as the API counts it. Babelfish stores NVARCHAR as UTF-8, so there
    -- DATALENGTH is the count. On SQL Server DATALENGTH counts UTF-16 bytes: a code unit is 1 to
    -- 3 UTF-8 bytes (a surrogate pair 4 for 2 units), so most payloads are decided by their
    -- length alone, and only those between a third of the limit and the limit are counted:
    -- through a UTF-8 collation where the server has one (SQL Server 2019+, Azure SQL; named in
    -- dynamic SQL, as SQL Server 2017 refuses to compile an unknown collation), else character
    -- by character.
    DECLARE @utf8_datalength BIT = CASE WHEN SERVERPROPERTY('Babelfish') = 1 THEN 1 ELSE 0 END;
    UPDATE #input
    SET payload_problem = N'invalid ' + prefix + N'payload: is more than 1048576 bytes '
        + N'(keep it within 1048576 bytes; store large data elsewhere and pass a reference)'
    WHERE DATALENGTH(payload) / CASE WHEN @utf8_datalength = 1 THEN 1 ELSE 2 END > 1048576;

    DECLARE @big INT = (SELECT MIN(ord) FROM #input
                        WHERE payload_problem IS NULL AND @utf8_datalength = 0
                          AND DATALENGTH(payload) / 2 > 349525);
    DECLARE @text NVARCHAR(MAX), @units BIGINT, @bytes BIGINT;
    DECLARE @utf8_collation BIT =
        CASE WHEN COLLATIONPROPERTY(N'Latin1_General_100_CI_AS_SC_UTF8', 'CodePage') = 65001
             THEN 1 ELSE 0 END;
    WHILE @big IS NOT NULL
    BEGIN
        SET @text = (SELECT payload FROM #input WHERE ord = @big);
        SET @units = DATALENGTH(@text) / 2;
        IF @utf8_collation = 1
            EXEC sys.sp_executesql
                N'SET @bytes = DATALENGTH(CAST(@text COLLATE Latin1_General_100_CI_AS_SC_UTF8 AS VARCHAR(MAX)));',
                N'@text NVARCHAR(MAX), @bytes BIGINT OUTPUT', @text = @text, @bytes = @bytes OUTPUT;
        ELSE
        BEGIN
            -- 4,000-unit pieces (not LOBs, so SUBSTRING is cheap), then every unit of a piece.
            WITH e1 (n) AS (SELECT 1 FROM (VALUES (1), (1), (1), (1), (1), (1), (1), (1), (1), (1)) AS v (n)),
                 e4 (n) AS (SELECT 1 FROM e1 AS a CROSS JOIN e1 AS b CROSS JOIN e1 AS c CROSS JOIN e1 AS d),
                 pieces (k) AS (SELECT TOP ((@units + 3999) / 4000) ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) - 1 FROM e4),
                 units (u) AS (SELECT TOP (4000) ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) FROM e4)
            SELECT @bytes = SUM(CASE WHEN c.code < 128 THEN 1
                                     WHEN c.code < 2048 THEN 2
                                     WHEN c.code BETWEEN 55296 AND 57343 THEN 2
                                     ELSE 3 END)
            FROM pieces AS p
            CROSS APPLY (SELECT CAST(SUBSTRING(@text COLLATE Latin1_General_100_BIN2, p.k * 4000 + 1, 4000) AS NVARCHAR(4000)) AS piece) AS s
            JOIN units AS x ON x.u <= DATALENGTH(s.piece) / 2
            CROSS APPLY (SELECT UNICODE(SUBSTRING(s.piece, x.u, 1)) AS code) AS c;
        END
        UPDATE #input
        SET payload_problem = N'invalid ' + prefix + N'payload: is ' + CAST(@bytes AS NVARCHAR(20))
            + N' bytes (keep it within 1048576 bytes; store large data elsewhere and pass a reference)'
        WHERE ord = @big AND @bytes > 1048576;
        SET @big = (SELECT MIN(ord) FROM #input
                    WHERE payload_problem IS NULL AND DATALENGTH(payload) / 2 > 349525 AND ord > @big);
    END

    -- Exactly one JSON value (ISJSON alone accepts only objects and arrays before SQL Server
    -- 2022, and a list of values inside brackets is more than one). OPENJSON only ever sees
    -- valid JSON: the CASE decides first (SQL Server does not promise to evaluate an OR's
    -- operands in order, and OPENJSON of anything else raises an error).
    UPDATE #input
    SET payload_problem = N'invalid ' + prefix + N'payload: is not valid JSON (send JSON text, e.g. {"order": 42})'
    WHERE payload_problem IS NULL
      AND (SELECT COUNT(*)
           FROM OPENJSON(CASE WHEN ISJSON(N'[' + payload + N']') = 1 THEN N'[' + payload + N']'
                              ELSE N'[]' END)) <> 1;

    -- Tags: an array of strings, each non-empty, trimmed, without commas or control
    -- characters, at most 1000 characters together (joined with commas).
    UPDATE i
    SET tags_problem = CASE
        WHEN i.tags_text IS NOT NULL
          OR (i.tags_json IS NOT NULL AND LEFT(TRIM(NCHAR(9) + NCHAR(10) + NCHAR(13) + N' ' FROM i.tags_json), 1) <> N'[')
            THEN N'invalid ' + i.prefix + N'tags: is not an array of strings (send e.g. ["billing", "eu"])'
        WHEN b.bad_key IS NOT NULL
            THEN N'invalid ' + i.prefix + N'tags[' + b.bad_key + N']: '
                 + CASE b.bad_kind
                       WHEN 1 THEN N'is not a string (send e.g. ["billing", "eu"])'
                       WHEN 2 THEN N'is empty or has surrounding whitespace (give non-empty, trimmed tags)'
                       ELSE N'contains a comma or control character (use tags without commas)' END
        WHEN t.joined > 1000
            THEN N'invalid ' + i.prefix + N'tags: are ' + CAST(t.joined AS NVARCHAR(20))
                 + N' characters long together (keep all tags together within 1000 characters)'
        END
    FROM #input AS i
    OUTER APPLY (
        SELECT TOP (1) e.[key] AS bad_key,
               CASE WHEN e.[type] <> 1 THEN 1
                    WHEN DATALENGTH(e.[value]) = 0
                      OR LEFT(e.[value], 1) COLLATE Latin1_General_100_BIN2 LIKE @space
                      OR RIGHT(e.[value], 1) COLLATE Latin1_General_100_BIN2 LIKE @space THEN 2
                    ELSE 3 END AS bad_kind
        FROM OPENJSON(i.tags_json) AS e
        WHERE e.[type] <> 1
           OR DATALENGTH(e.[value]) = 0
           OR LEFT(e.[value], 1) COLLATE Latin1_General_100_BIN2 LIKE @space
           OR RIGHT(e.[value], 1) COLLATE Latin1_General_100_BIN2 LIKE @space
           OR CHARINDEX(N',', e.[value]) > 0
           OR e.[value] COLLATE Latin1_General_100_BIN2 LIKE @control
           OR CHARINDEX(NCHAR(0) COLLATE Latin1_General_100_BIN2, e.[value] COLLATE Latin1_General_100_BIN2) > 0
        ORDER BY TRY_CAST(e.[key] AS INT)
    ) AS b
    OUTER APPLY (
        SELECT SUM(DATALENGTH(e.[value]) / 2) + COUNT(*) - 1 AS joined
        FROM OPENJSON(i.tags_json) AS e
    ) AS t
    WHERE i.tags_json IS NOT NULL OR i.tags_text IS NOT NULL;

    -- The first problem of each request, in the order the API checks them.
    UPDATE i
    SET problem = COALESCE(
        CASE WHEN i.is_object = 0 THEN N'invalid ' + CASE WHEN @single = 1 THEN N'job' ELSE N'jobs[' + CAST(i.ord AS NVARCHAR(10)) + N']' END + N': is not a JSON object' END,
        CASE WHEN i.id_text IS NOT NULL AND given.id IS NULL
             THEN N'invalid ' + i.prefix + N'id: is not a UUID (leave it out and deck generates a UUID v7)' END,
        q.problem, jt.problem, i.payload_problem, i.tags_problem,
        CASE WHEN i.priority_text IS NOT NULL AND TRY_CAST(i.priority_text AS INT) IS NULL
             THEN N'invalid ' + i.prefix + N'priority: is not a whole number (higher runs first; default 0)' END,
        ik.problem, ci.problem, cb.problem,
        CASE WHEN i.scheduled_text IS NOT NULL AND scheduled.utc IS NULL
             THEN N'invalid ' + i.prefix + N'scheduled_at: is not an ISO 8601 time (e.g. 2026-05-01T12:00:00Z)' END,
        CASE WHEN i.delay_text IS NOT NULL AND (TRY_CAST(i.delay_text AS BIGINT) IS NULL OR TRY_CAST(i.delay_text AS BIGINT) < 0)
             THEN N'invalid ' + i.prefix + N'delay_ms: is not a whole number of milliseconds (give 0 or more)' END,
        CASE WHEN i.scheduled_text IS NOT NULL AND i.delay_text IS NOT NULL
             THEN N'invalid ' + i.prefix + N'delay_ms: was given together with scheduled_at (give either a delay or a schedule, not both)' END,
        CASE WHEN i.expires_text IS NOT NULL AND expires.utc IS NULL
             THEN N'invalid ' + i.prefix + N'expires_at: is not an ISO 8601 time (e.g. 2026-05-01T12:00:00Z)' END,
        CASE WHEN i.max_attempts_text IS NOT NULL AND TRY_CAST(i.max_attempts_text AS INT) IS NULL
             THEN N'invalid ' + i.prefix + N'max_attempts: is not a whole number (give at least 1 (the first run counts))'
             WHEN TRY_CAST(i.max_attempts_text AS INT) < 1
             THEN N'invalid ' + i.prefix + N'max_attempts: is ' + i.max_attempts_text + N' (give at least 1 (the first run counts))' END,
        CASE WHEN i.continuation_text IS NOT NULL
             THEN N'invalid ' + i.prefix + N'continuation: is not an object (send {"queue": "...", "job_type": "...", "trigger": "on_success"})' END,
        cq.problem, cj.problem,
        CASE WHEN i.continuation_json IS NOT NULL
              AND (i.cont_trigger IS NULL OR i.cont_trigger NOT IN (N'on_success', N'on_failure', N'always'))
             THEN N'invalid ' + i.prefix + N'continuation.trigger: is not on_success, on_failure or always' END,
        -- The uniqueness window: 1 ms to 366 days, with a key; states from the three names.
        CASE WHEN i.unique_for_text IS NOT NULL
              AND (TRY_CAST(i.unique_for_text AS BIGINT) IS NULL
                   OR TRY_CAST(i.unique_for_text AS BIGINT) NOT BETWEEN 1 AND 31622400000)
             THEN N'invalid ' + i.prefix + N'unique_for_ms: is not a whole number of milliseconds from 1 to 31622400000 (keep the window within 366 days)'
             WHEN i.unique_for_text IS NOT NULL AND i.idempotency_key IS NULL
             THEN N'invalid ' + i.prefix + N'unique_for_ms: was given without an idempotency_key (give the key that must stay unique, e.g. "idempotency_key": "invoice-42")' END,
        CASE WHEN i.unique_states_text IS NOT NULL
              OR (i.unique_states_json IS NOT NULL AND LEFT(TRIM(NCHAR(9) + NCHAR(10) + NCHAR(13) + N' ' FROM i.unique_states_json), 1) <> N'[')
              OR EXISTS (SELECT 1 FROM OPENJSON(i.unique_states_json) AS e
                         WHERE e.[type] <> 1 OR e.[value] NOT IN (N'active', N'succeeded', N'dead'))
             THEN N'invalid ' + i.prefix + N'unique_states: is not an array of "active", "succeeded" and "dead" (send e.g. ["succeeded"])'
             WHEN i.unique_states_json IS NOT NULL AND i.unique_for_text IS NULL
              AND EXISTS (SELECT 1 FROM OPENJSON(i.unique_states_json))
             THEN N'invalid ' + i.prefix + N'unique_states: was given without unique_for_ms (say how long the key stays taken, e.g. "unique_for_ms": 3600000 for an hour)' END,
        -- The trace context: text a span context was written as, within its column.
        CASE WHEN DATALENGTH(i.trace_text) / 2 > 1024
             THEN N'invalid ' + i.prefix + N'trace_context: is ' + CAST(DATALENGTH(i.trace_text) / 2 AS NVARCHAR(20))
                  + N' characters long (give a W3C traceparent, optionally followed by a semicolon and a tracestate, in at most 1024 characters)'
             WHEN i.trace_text COLLATE Latin1_General_100_BIN2 LIKE @control
             THEN N'invalid ' + i.prefix + N'trace_context: contains control characters (give a W3C traceparent, optionally followed by a semicolon and a tracestate)' END)
    FROM #input AS i
    CROSS APPLY [{schema}].[uuid_bytes](i.id_text) AS given
    CROSS APPLY [{schema}].[utc_time](i.scheduled_text) AS scheduled
    CROSS APPLY [{schema}].[utc_time](i.expires_text) AS expires
    CROSS APPLY [{schema}].[name_problem](i.prefix + N'queue', N'queue', i.queue, 1) AS q
    CROSS APPLY [{schema}].[name_problem](i.prefix + N'job_type', N'job_type', i.job_type, 1) AS jt
    CROSS APPLY [{schema}].[name_problem](i.prefix + N'idempotency_key', N'idempotency_key', i.idempotency_key, 0) AS ik
    CROSS APPLY [{schema}].[name_problem](i.prefix + N'correlation_id', N'correlation_id', i.correlation_id, 0) AS ci
    CROSS APPLY [{schema}].[name_problem](i.prefix + N'created_by', N'created_by', i.created_by, 0) AS cb
    CROSS APPLY [{schema}].[name_problem](i.prefix + N'continuation.queue', N'continuation.queue', i.cont_queue,
                                          CASE WHEN i.continuation_json IS NULL THEN 0 ELSE 1 END) AS cq
    CROSS APPLY [{schema}].[name_problem](i.prefix + N'continuation.job_type', N'continuation.job_type', i.cont_job_type,
                                          CASE WHEN i.continuation_json IS NULL THEN 0 ELSE 1 END) AS cj;

    SET @error = (SELECT TOP (1) problem FROM #input WHERE problem IS NOT NULL ORDER BY ord);
    IF @error IS NOT NULL
        THROW 51000, @error, 1;

    -- Valid: from here on any failure rolls back everything this call did, and dooms a
    -- caller's transaction (roll it back).
    SET XACT_ABORT ON;
    DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
    DECLARE @own_transaction BIT = CASE WHEN @@TRANCOUNT = 0 THEN 1 ELSE 0 END;
    -- Counter slots 0-15 are deck's own sessions'; a caller's transaction, which may stay
    -- open for as long as the application likes, writes slots 16-31, so the counter rows it
    -- holds until its commit never block a claim or a completion.
    DECLARE @slot TINYINT = CASE WHEN @own_transaction = 1 THEN @@SPID % 16 ELSE 16 + @@SPID % 16 END;

    CREATE TABLE #jobs (
        ord             INT            NOT NULL PRIMARY KEY,
        slice           INT            NOT NULL,
        id              BINARY(16)     NOT NULL,
        queue           NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
        job_type        NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NOT NULL,
        payload         NVARCHAR(MAX)  COLLATE DATABASE_DEFAULT NOT NULL,
        tags            NVARCHAR(1002) COLLATE DATABASE_DEFAULT NOT NULL,
        priority        INT            NOT NULL,
        idempotency_key NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NULL,
        correlation_id  NVARCHAR(255)  COLLATE DATABASE_DEFAULT NULL,
        created_by      NVARCHAR(255)  COLLATE DATABASE_DEFAULT NULL,
        scheduled_at    DATETIME2(6)   NOT NULL,
        expires_at      DATETIME2(6)   NULL,
        max_attempts    INT            NULL,
        continuation    NVARCHAR(MAX)  COLLATE DATABASE_DEFAULT NULL,
        cont_queue      NVARCHAR(255)  COLLATE Latin1_General_100_BIN2 NULL,
        unique_for_ms   BIGINT         NULL,
        trace_context   NVARCHAR(1024) COLLATE DATABASE_DEFAULT NULL,
        holds_succeeded BIT            NOT NULL,
        holds_dead      BIT            NOT NULL,
        outcome_id      BINARY(16)     NULL,
        created         BIT            NULL,
        written         BIT            NOT NULL DEFAULT 0
    );

    -- Ids: the caller's, or a UUID v7 from the database clock ([uuid_v7], with a NEWID() per
    -- request), as continuations get them.
    INSERT INTO #jobs (ord, slice, id, queue, job_type, payload, tags, priority, idempotency_key,
                       correlation_id, created_by, scheduled_at, expires_at, max_attempts,
                       continuation, cont_queue, unique_for_ms, holds_succeeded, holds_dead,
                       trace_context)
    SELECT i.ord, i.ord / 1000, ISNULL(given.id, fresh.id),
           i.queue, i.job_type, i.payload,
           ISNULL((SELECT N',' + STRING_AGG(e.[value], N',') WITHIN GROUP (ORDER BY CAST(e.[key] AS INT)) + N','
                   FROM OPENJSON(i.tags_json) AS e), N''),
           ISNULL(TRY_CAST(i.priority_text AS INT), 0),
           i.idempotency_key, i.correlation_id, i.created_by,
           CASE WHEN i.scheduled_text IS NOT NULL
                    THEN scheduled.utc
                WHEN i.delay_text IS NOT NULL
                    -- DATEADD takes an int: delays are capped at ~63 years, as the API caps them.
                    THEN DATEADD(MILLISECOND, TRY_CAST(i.delay_text AS BIGINT) % 1000,
                                 DATEADD(SECOND, CAST(CASE WHEN TRY_CAST(i.delay_text AS BIGINT) > 2000000000000
                                                           THEN 2000000000000
                                                           ELSE TRY_CAST(i.delay_text AS BIGINT) END / 1000 AS INT), @now))
                ELSE @now END,
           expires.utc,
           TRY_CAST(i.max_attempts_text AS INT),
           CASE WHEN i.continuation_json IS NULL THEN NULL
                ELSE (SELECT i.cont_queue AS [queue], i.cont_job_type AS job_type, i.cont_trigger AS [trigger]
                      FOR JSON PATH, WITHOUT_ARRAY_WRAPPER) END,
           i.cont_queue,
           TRY_CAST(i.unique_for_text AS BIGINT),
           CASE WHEN EXISTS (SELECT 1 FROM OPENJSON(i.unique_states_json) AS e WHERE e.[value] = N'succeeded')
                THEN 1 ELSE 0 END,
           CASE WHEN EXISTS (SELECT 1 FROM OPENJSON(i.unique_states_json) AS e WHERE e.[value] = N'dead')
                THEN 1 ELSE 0 END,
           NULLIF(i.trace_text, N'')
    FROM (SELECT r.*, NEWID() AS random FROM #input AS r) AS i
    CROSS APPLY [{schema}].[uuid_bytes](i.id_text) AS given
    CROSS APPLY [{schema}].[uuid_v7](@now, i.random) AS fresh
    CROSS APPLY [{schema}].[utc_time](i.scheduled_text) AS scheduled
    CROSS APPLY [{schema}].[utc_time](i.expires_text) AS expires;

    DECLARE @need_queues TABLE (name NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY);
    DECLARE @missing_queues TABLE (name NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY);
    DECLARE @added TABLE (queue NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY, jobs INT NOT NULL);
    DECLARE @slice INT = 0, @slices INT = (SELECT MAX(slice) FROM #jobs);

    BEGIN TRY
        IF @own_transaction = 1
            BEGIN TRANSACTION;

        -- Lock order (queues, jobs, counters): settings rows for every queue a job or its
        -- continuation names, first. The unlocked probe keeps the common case (the queue
        -- exists) free of range locks; the locked re-check makes the insert race free.
        INSERT INTO @need_queues (name)
        SELECT queue FROM #jobs
        UNION
        SELECT cont_queue FROM #jobs WHERE cont_queue IS NOT NULL;
        INSERT INTO @missing_queues (name)
        SELECT n.name FROM @need_queues AS n
        WHERE NOT EXISTS (SELECT 1 FROM [{schema}].[queues] AS q WHERE q.name = n.name);
        INSERT INTO [{schema}].[queues] (name, paused, hidden, created_at)
        SELECT m.name, 0, 0, @now FROM @missing_queues AS m
        WHERE NOT EXISTS (SELECT 1 FROM [{schema}].[queues] AS q WITH (UPDLOCK, HOLDLOCK)
                          WHERE q.name = m.name);

        -- A retry of a call that did commit: its rows are already here, under their own ids.
        UPDATE j SET j.outcome_id = j.id, j.created = 1
        FROM #jobs AS j
        WHERE EXISTS (SELECT 1 FROM [{schema}].[jobs_hot] AS h WHERE h.id = j.id)
           OR EXISTS (SELECT 1 FROM [{schema}].[jobs_archive] AS a WHERE a.id = j.id)
           OR EXISTS (SELECT 1 FROM [{schema}].[jobs_dlq] AS d WHERE d.id = j.id);

        -- An active job already holds the key. A seek on the filtered unique index, so the
        -- range lock covers only the key (or the gap where it would go): two callers with
        -- one key serialise on it, callers with other keys never meet.
        UPDATE j SET j.outcome_id = h.id, j.created = 0
        FROM #jobs AS j, [{schema}].[jobs_hot] AS h WITH (UPDLOCK, HOLDLOCK, FORCESEEK)
        WHERE h.idempotency_key = j.idempotency_key AND h.idempotency_key IS NOT NULL
          AND j.outcome_id IS NULL AND j.idempotency_key IS NOT NULL;

        -- Inside its uniqueness window, a finished job in a state the window counts holds the
        -- key: read from the pillar it is in, or, once retention or an operator removed its
        -- row, from the state the row left in. The range lock above already serialises
        -- callers with one key; UPDLOCK keeps the key row as read until the upsert below.
        UPDATE j SET j.outcome_id = u.job_id, j.created = 0
        FROM #jobs AS j, [{schema}].[unique_keys] AS u WITH (UPDLOCK, HOLDLOCK, FORCESEEK)
        WHERE u.[key] = j.idempotency_key
          AND j.outcome_id IS NULL AND j.idempotency_key IS NOT NULL AND u.held_until > @now
          AND 1 = CASE WHEN EXISTS (SELECT 1 FROM [{schema}].[jobs_archive] AS a WHERE a.id = u.job_id)
                           THEN u.holds_succeeded
                       WHEN EXISTS (SELECT 1 FROM [{schema}].[jobs_dlq] AS d WHERE d.id = u.job_id)
                           THEN u.holds_dead
                       WHEN u.left_state = 1 THEN u.holds_succeeded
                       WHEN u.left_state = 2 THEN u.holds_dead
                       ELSE 0 END;

        -- Duplicates inside the call: the first request with a key wins.
        UPDATE j SET j.outcome_id = w.id, j.created = 0
        FROM #jobs AS j
        JOIN (SELECT idempotency_key, MIN(ord) AS first_ord FROM #jobs
              WHERE outcome_id IS NULL AND idempotency_key IS NOT NULL
              GROUP BY idempotency_key) AS f ON f.idempotency_key = j.idempotency_key
        JOIN #jobs AS w ON w.ord = f.first_ord
        WHERE j.outcome_id IS NULL AND j.ord > f.first_ord;

        -- At most 1,000 rows per statement, so no statement reaches the 5,000 locks at which
        -- SQL Server escalates to a table lock.
        WHILE @slice <= @slices
        BEGIN
            INSERT INTO [{schema}].[jobs_hot]
                (id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id,
                 created_by, created_at, scheduled_at, expires_at, attempt, max_attempts, status,
                 cancel_requested, continuation, trace_context)
            SELECT id, queue, job_type, payload, tags, priority, idempotency_key, correlation_id,
                   created_by, @now, scheduled_at, expires_at, 0, max_attempts, 0, 0, continuation,
                   trace_context
            FROM #jobs
            WHERE outcome_id IS NULL AND slice = @slice
            ORDER BY ord;
            SET @slice += 1;
        END

        UPDATE #jobs SET outcome_id = id, created = 1, written = 1 WHERE outcome_id IS NULL;

        -- A new job with a window takes its key from now on, replacing a lapsed holder or one
        -- whose state the window does not count (the checks above found no live one).
        UPDATE u
        SET u.job_id = j.id,
            u.held_until = DATEADD(MILLISECOND, j.unique_for_ms % 1000,
                                   DATEADD(SECOND, CAST(j.unique_for_ms / 1000 AS INT), @now)),
            u.holds_succeeded = j.holds_succeeded, u.holds_dead = j.holds_dead, u.left_state = NULL
        FROM [{schema}].[unique_keys] AS u WITH (UPDLOCK, HOLDLOCK, FORCESEEK), #jobs AS j
        WHERE j.idempotency_key = u.[key] AND j.written = 1 AND j.unique_for_ms IS NOT NULL;
        INSERT INTO [{schema}].[unique_keys] ([key], job_id, held_until, holds_succeeded, holds_dead, left_state)
        SELECT j.idempotency_key, j.id,
               DATEADD(MILLISECOND, j.unique_for_ms % 1000,
                       DATEADD(SECOND, CAST(j.unique_for_ms / 1000 AS INT), @now)),
               j.holds_succeeded, j.holds_dead, NULL
        FROM #jobs AS j
        WHERE j.written = 1 AND j.unique_for_ms IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM [{schema}].[unique_keys] AS u WITH (UPDLOCK, HOLDLOCK)
                          WHERE u.[key] = j.idempotency_key);

        -- Pending counters, on this session's slot of each queue's striped counter rows.
        INSERT INTO @added (queue, jobs)
        SELECT queue, COUNT(*) FROM #jobs WHERE written = 1 GROUP BY queue;
        UPDATE c SET c.pending_rows = c.pending_rows + a.jobs
        FROM [{schema}].[queue_counter_slots] AS c WITH (UPDLOCK, HOLDLOCK), @added AS a
        WHERE a.queue = c.queue AND c.slot = @slot;
        INSERT INTO [{schema}].[queue_counter_slots]
            (queue, slot, pending_rows, fetched_rows, processing_rows, archive_rows, dlq_rows)
        SELECT a.queue, @slot, a.jobs, 0, 0, 0, 0
        FROM @added AS a
        WHERE NOT EXISTS (SELECT 1 FROM [{schema}].[queue_counter_slots] AS c WITH (UPDLOCK, HOLDLOCK)
                          WHERE c.queue = a.queue AND c.slot = @slot);

        IF @own_transaction = 1
            COMMIT TRANSACTION;
    END TRY
    BEGIN CATCH
        IF @own_transaction = 1 AND XACT_STATE() <> 0
            ROLLBACK TRANSACTION;
        THROW;
    END CATCH;

    SELECT t.[text] AS id, j.created, j.ord
    FROM #jobs AS j
    CROSS APPLY [{schema}].[uuid_text](j.outcome_id) AS t
    ORDER BY j.ord;
END
