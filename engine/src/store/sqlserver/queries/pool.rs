//! What every pooled session runs first (`pool`), and the store's liveness probe.

use super::{Class, Reads, Statement};

/// Run once per pooled connection. The SET options are the ones filtered indexes require
/// for DML (most drivers set them; being explicit costs nothing). LOCK_TIMEOUT turns an
/// unexpected block into error 1222 (retried) instead of a hang.
pub const SESSION_SETUP: Statement = Statement {
    name: "session_setup",
    class: Class::Committed,
    reads: Reads::Nothing,
    sql: "SET NOCOUNT ON;
SET ANSI_NULLS ON;
SET ANSI_PADDING ON;
SET ANSI_WARNINGS ON;
SET ARITHABORT ON;
SET CONCAT_NULL_YIELDS_NULL ON;
SET QUOTED_IDENTIFIER ON;
SET NUMERIC_ROUNDABORT OFF;
SET LOCK_TIMEOUT 10000;
SET DEADLOCK_PRIORITY NORMAL;",
};

pub const PING: Statement = Statement {
    name: "ping",
    class: Class::Committed,
    reads: Reads::Rows(&["version"]),
    sql: "SET NOCOUNT ON;
SELECT TOP (1) v.version FROM [{schema}].[schema_version] AS v ORDER BY v.version DESC;",
};
