CREATE FUNCTION [{schema}].[uuid_text] (@id BINARY(16))
RETURNS TABLE
AS
-- A job or batch id (BINARY(16), RFC 4122 byte order) as canonical UUID text: lower case,
-- with hyphens. The bytes are read through UNIQUEIDENTIFIER, whose text shows the first three
-- groups byte-swapped (SQL Server's GUID layout), and put back in order. CONVERT(CHAR(32), @id,
-- 2) would be shorter, but Babelfish ignores the binary style and returns the raw bytes; this
-- form reads the same on SQL Server, Azure SQL and Babelfish. Inline, so a query that applies
-- it to many rows folds it in.
RETURN
SELECT LOWER(SUBSTRING(g.t, 7, 2) + SUBSTRING(g.t, 5, 2) + SUBSTRING(g.t, 3, 2) + SUBSTRING(g.t, 1, 2)
             + N'-' + SUBSTRING(g.t, 12, 2) + SUBSTRING(g.t, 10, 2)
             + N'-' + SUBSTRING(g.t, 17, 2) + SUBSTRING(g.t, 15, 2)
             + SUBSTRING(g.t, 19, 18)) AS [text]
FROM (SELECT CAST(CAST(@id AS UNIQUEIDENTIFIER) AS NCHAR(36)) AS t) AS g;
