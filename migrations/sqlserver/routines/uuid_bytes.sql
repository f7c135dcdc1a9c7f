CREATE FUNCTION [{schema}].[uuid_bytes] (@text NVARCHAR(MAX))
RETURNS TABLE
AS
-- Canonical UUID text (32 hex digits, or 36 characters with hyphens after the 8th, 12th, 16th
-- and 20th digit, either case) as BINARY(16) in RFC 4122 byte order; NULL when it is not one.
-- The inverse of [uuid_text]: the digits are arranged in SQL Server's GUID layout and read
-- through UNIQUEIDENTIFIER, which Babelfish converts exactly as SQL Server does (CONVERT(BINARY,
-- @text, 2) is not read there). Inline, so a query that applies it to many rows folds it in.
RETURN
SELECT CAST(TRY_CAST(SUBSTRING(h.x, 7, 2) + SUBSTRING(h.x, 5, 2) + SUBSTRING(h.x, 3, 2) + SUBSTRING(h.x, 1, 2)
                     + N'-' + SUBSTRING(h.x, 11, 2) + SUBSTRING(h.x, 9, 2)
                     + N'-' + SUBSTRING(h.x, 15, 2) + SUBSTRING(h.x, 13, 2)
                     + N'-' + SUBSTRING(h.x, 17, 4) + N'-' + SUBSTRING(h.x, 21, 12)
                     AS UNIQUEIDENTIFIER) AS BINARY(16)) AS id
FROM (SELECT CASE WHEN LEN(@text) = 32 AND @text NOT LIKE N'%[^0-9A-Fa-f]%' THEN @text
                  WHEN LEN(@text) = 36 AND SUBSTRING(@text, 9, 1) = N'-' AND SUBSTRING(@text, 14, 1) = N'-'
                   AND SUBSTRING(@text, 19, 1) = N'-' AND SUBSTRING(@text, 24, 1) = N'-'
                   AND REPLACE(@text, N'-', N'') NOT LIKE N'%[^0-9A-Fa-f]%'
                   AND LEN(REPLACE(@text, N'-', N'')) = 32
                      THEN REPLACE(@text, N'-', N'') END AS x) AS h;
