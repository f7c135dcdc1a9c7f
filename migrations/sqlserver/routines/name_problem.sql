CREATE FUNCTION [{schema}].[name_problem]
    (@field NVARCHAR(200), @name NVARCHAR(100), @value NVARCHAR(MAX), @required BIT)
RETURNS TABLE
AS
-- The API's rule for queue names, type keys, idempotency keys and the like (1 to 255
-- characters, no control characters, no surrounding white space), as one message or NULL.
-- Inline, so the optimizer folds it into the query that applies it to many rows.
RETURN
SELECT CASE
    WHEN @value IS NULL AND @required = 0 THEN NULL
    WHEN @value IS NULL OR DATALENGTH(@value) = 0
        THEN N'invalid ' + @field + N': is empty (give a ' + @name + N' of 1 to 255 characters)'
    WHEN DATALENGTH(@value) / 2 > 255
        THEN N'invalid ' + @field + N': is ' + CAST(DATALENGTH(@value) / 2 AS NVARCHAR(20))
             + N' characters long (use at most 255 characters)'
    WHEN @value COLLATE Latin1_General_100_BIN2
             LIKE N'%[' + NCHAR(1) + N'-' + NCHAR(31) + NCHAR(127) + N'-' + NCHAR(159) + N']%'
      OR CHARINDEX(NCHAR(0) COLLATE Latin1_General_100_BIN2, @value COLLATE Latin1_General_100_BIN2) > 0
        THEN N'invalid ' + @field + N': contains control characters (remove tabs, newlines and other control characters)'
    WHEN LEFT(@value, 1) COLLATE Latin1_General_100_BIN2
             LIKE N'[ ' + NCHAR(160) + NCHAR(5760) + NCHAR(8192) + N'-' + NCHAR(8202) + NCHAR(8232)
                  + NCHAR(8233) + NCHAR(8239) + NCHAR(8287) + NCHAR(12288) + N']'
      OR RIGHT(@value, 1) COLLATE Latin1_General_100_BIN2
             LIKE N'[ ' + NCHAR(160) + NCHAR(5760) + NCHAR(8192) + N'-' + NCHAR(8202) + NCHAR(8232)
                  + NCHAR(8233) + NCHAR(8239) + NCHAR(8287) + NCHAR(12288) + N']'
        THEN N'invalid ' + @field + N': has leading or trailing whitespace (trim the value)'
    END AS problem;
