CREATE FUNCTION [{schema}].[fingerprint] (@head NVARCHAR(MAX), @job_type NVARCHAR(255))
RETURNS TABLE
AS
-- A dead letter's fingerprint: the first 8 bytes of SHA-256 over the head (reason, kind and
-- normalised message, computed by the engine) and the job type, as 16 lower-case hex digits.
-- On SQL Server and Azure SQL the hashed bytes are the text's UTF-16LE, so the value equals
-- FingerprintHead::for_job_type; Babelfish converts NVARCHAR to other bytes (README, SQL
-- Server section), so there the groups are the same but the values differ. The hex digits
-- are read through [uuid_text]: CONVERT(CHAR(16), …, 2) returns raw bytes on Babelfish.
RETURN
SELECT LEFT(REPLACE(t.[text], N'-', N''), 16) AS fingerprint
FROM [{schema}].[uuid_text](CAST(CAST(HASHBYTES('SHA2_256', CAST(@head + @job_type AS VARBINARY(MAX)))
                                      AS BINARY(8)) AS BINARY(16))) AS t;
