CREATE FUNCTION [{schema}].[utc_time] (@text NVARCHAR(MAX))
RETURNS TABLE
AS
-- An ISO 8601 time of a request as UTC DATETIME2(6); NULL when it is not one. With an offset
-- ("+02:00") it is read as DATETIMEOFFSET and moved to UTC (DATEPART(TZOFFSET, …) rather than
-- SWITCHOFFSET, which Babelfish does not take); with "Z", or without any zone, it is UTC
-- already and read as DATETIME2. The last is the form deck sends, and the only one Babelfish
-- reads (it converts no text to DATETIMEOFFSET). Inline, so it folds into the query.
RETURN
SELECT CASE
    WHEN o.v IS NOT NULL THEN DATEADD(MINUTE, -DATEPART(TZOFFSET, o.v), CAST(o.v AS DATETIME2(6)))
    WHEN @text LIKE N'%[+-][0-9][0-9]:[0-9][0-9]' THEN NULL
    WHEN @text LIKE N'%[Zz]' THEN TRY_CONVERT(DATETIME2(6), LEFT(@text, LEN(@text) - 1))
    ELSE TRY_CONVERT(DATETIME2(6), @text) END AS utc
FROM (SELECT TRY_CONVERT(DATETIMEOFFSET(6), CASE WHEN @text LIKE N'%[+-][0-9][0-9]:[0-9][0-9]'
                                                 THEN @text END) AS v) AS o;
