-- The Deck schema, version 11: routines (the procedures [enqueue_batch] and [enqueue] and the
-- functions they and the store's statements use) are no longer copied whole into every
-- migration that changes them. Each is defined once, in migrations/sqlserver/routines/, and
-- the migration script applies it after the versioned migrations whenever its text changed:
-- this table records the SHA-256 of the text each routine was last applied from.
--
-- Procedures are changed with ALTER PROCEDURE (created first as a stub when missing), which
-- keeps the permissions granted on them; functions are dropped and created again (Babelfish
-- has no ALTER FUNCTION), so grant on the schema (GRANT ... ON SCHEMA::deck), not on them.
-- The conventions of 0001 hold.
CREATE TABLE [{schema}].[routine_versions] (
    [name]       NVARCHAR(128) NOT NULL,
    [checksum]   CHAR(64)      NOT NULL,
    [applied_at] DATETIME2(6)  NOT NULL,
    CONSTRAINT [PK_routine_versions] PRIMARY KEY CLUSTERED ([name])
);
