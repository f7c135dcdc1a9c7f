CREATE FUNCTION [{schema}].[uuid_v7] (@now DATETIME2(6), @random UNIQUEIDENTIFIER)
RETURNS TABLE
AS
-- A new id: a UUID v7 (RFC 9562) of 48-bit Unix milliseconds from @now (the database clock),
-- the version and variant bits, and random bits from @random (pass NEWID() computed per row,
-- e.g. in a derived table's select list: a NEWID() inside this function is not allowed). In
-- RFC byte order, so ids sort by creation time as the application sees them.
--
-- Built as text in SQL Server's GUID layout and read through UNIQUEIDENTIFIER, which
-- Babelfish converts exactly as SQL Server does (it adds BINARY values instead of
-- concatenating them). The milliseconds' six bytes padded to sixteen read as a GUID give the
-- first two groups ("t3t2t1t0-t5t4-") already in that layout; the third group is random but
-- for the version digit 7 (stored first there: its bytes are swapped); the rest, NEWID's
-- own variant digit included, comes from @random as it is.
RETURN
SELECT CAST(CAST(LEFT(CAST(CAST(CAST(CAST(DATEDIFF_BIG(MILLISECOND, CAST('1970-01-01' AS DATETIME2(6)), @now)
                                          AS BINARY(6)) AS BINARY(16)) AS UNIQUEIDENTIFIER) AS NCHAR(36)), 14)
                 + SUBSTRING(r.t, 16, 2) + N'7' + SUBSTRING(r.t, 18, 1) + SUBSTRING(r.t, 19, 18)
                 AS UNIQUEIDENTIFIER) AS BINARY(16)) AS id
FROM (SELECT CAST(@random AS NCHAR(36)) AS t) AS r;
