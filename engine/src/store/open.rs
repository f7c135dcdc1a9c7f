//! Choose and open a backend from a database URL.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{StoreError, StoreResult};
use crate::store::Store;

/// SQLite durability: `Full` syncs the WAL on every commit (no committed job is lost on power
/// failure); `Normal` syncs at checkpoints only (faster; a power cut may lose the last commits,
/// a process crash loses nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SqliteSynchronous {
    #[default]
    Full,
    Normal,
}

/// Backend options that are not part of the URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreOptions {
    pub sqlite_synchronous: SqliteSynchronous,
    /// SQL Server schema holding the tables (validated identifier).
    pub schema: String,
    /// SQL Server: apply missing migrations at startup (under an application lock).
    pub auto_create_schema: bool,
    /// SQL Server connection pool size.
    pub pool_size: u32,
    /// SQLite read connections (console, API, telemetry); reads beyond them wait for one.
    pub sqlite_readers: u32,
    /// SQL Server: how long one statement may run before deck gives up on it ("30s"). A
    /// transition that timed out may still commit on the server, so it is re-sent only where
    /// that is safe (README, "SQL Server"). The migration script has its own, longer limit.
    #[serde(with = "crate::values::duration")]
    pub command_timeout: std::time::Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            sqlite_synchronous: SqliteSynchronous::Full,
            schema: "deck".to_string(),
            auto_create_schema: true,
            pool_size: 10,
            sqlite_readers: 4,
            command_timeout: std::time::Duration::from_secs(30),
        }
    }
}

/// Which backend a database URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// `sqlite://path/to/file.db` (relative paths are relative to the working directory).
    Sqlite { path: String },
    /// An ADO-style connection string or an `mssql://` / `sqlserver://` URL, passed on as given.
    SqlServer { connection: String },
}

impl DatabaseUrl {
    pub fn parse(url: &str) -> StoreResult<Self> {
        let trimmed = url.trim();
        let lower = trimmed.to_ascii_lowercase();
        if let Some(path) = trimmed
            .strip_prefix("sqlite://")
            .or_else(|| trimmed.strip_prefix("sqlite:"))
        {
            if path.is_empty() {
                return Err(StoreError::Config {
                    url: url.to_string(),
                    cause: "the SQLite URL names no file".into(),
                    help: "use sqlite://deck.db or sqlite:///var/lib/deck/deck.db".into(),
                });
            }
            return Ok(DatabaseUrl::Sqlite {
                path: path.to_string(),
            });
        }
        if lower.starts_with("mssql://")
            || lower.starts_with("sqlserver://")
            || lower.contains("server=")
        {
            return Ok(DatabaseUrl::SqlServer {
                connection: trimmed.to_string(),
            });
        }
        Err(StoreError::Config {
            url: url.to_string(),
            cause: "unrecognised database URL".into(),
            help: "use sqlite://deck.db for the embedded store, or a SQL Server connection string \
                   such as Server=tcp:host,1433;Database=deck;User Id=…;Password=…;TrustServerCertificate=true"
                .into(),
        })
    }

    /// The URL with any password replaced, for logs and error messages.
    pub fn redacted(&self) -> String {
        match self {
            DatabaseUrl::Sqlite { path } => format!("sqlite://{path}"),
            DatabaseUrl::SqlServer { connection } => redact_password(connection),
        }
    }
}

fn redact_password(connection: &str) -> String {
    if connection.to_ascii_lowercase().contains("://") {
        // mssql://user:password@host/db
        if let (Some(scheme_end), Some(at)) = (connection.find("://"), connection.rfind('@'))
            && let Some(colon) = connection[scheme_end + 3..at].find(':')
        {
            let start = scheme_end + 3 + colon + 1;
            return format!("{}***{}", &connection[..start], &connection[at..]);
        }
        return connection.to_string();
    }
    connection
        .split(';')
        .map(|part| match part.split_once('=') {
            Some((k, _))
                if matches!(k.trim().to_ascii_lowercase().as_str(), "password" | "pwd") =>
            {
                format!("{k}=***")
            }
            _ => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// Open the backend a URL names, bootstrapping its schema as the options say.
pub async fn open_store(url: &str, options: &StoreOptions) -> StoreResult<Arc<dyn Store>> {
    match DatabaseUrl::parse(url)? {
        DatabaseUrl::Sqlite { path } => crate::store::sqlite::open(&path, options).await,
        DatabaseUrl::SqlServer { connection } => {
            crate::store::sqlserver::open(&connection, options).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sqlite_urls() {
        assert_eq!(
            DatabaseUrl::parse("sqlite://deck.db").unwrap(),
            DatabaseUrl::Sqlite {
                path: "deck.db".into()
            }
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite:///var/lib/deck.db").unwrap(),
            DatabaseUrl::Sqlite {
                path: "/var/lib/deck.db".into()
            }
        );
        assert!(DatabaseUrl::parse("sqlite://").is_err());
    }

    #[test]
    fn recognises_sql_server() {
        let ado = "Server=tcp:db,1433;Database=deck;User Id=sa;Password=secret;TrustServerCertificate=true";
        assert!(matches!(
            DatabaseUrl::parse(ado).unwrap(),
            DatabaseUrl::SqlServer { .. }
        ));
        assert!(matches!(
            DatabaseUrl::parse("mssql://sa:pw@db/deck").unwrap(),
            DatabaseUrl::SqlServer { .. }
        ));
    }

    #[test]
    fn redacts_passwords() {
        let ado = DatabaseUrl::parse("Server=db;User Id=sa;Password=secret").unwrap();
        assert_eq!(ado.redacted(), "Server=db;User Id=sa;Password=***");
        let url = DatabaseUrl::parse("mssql://sa:secret@db:1433/deck").unwrap();
        assert_eq!(url.redacted(), "mssql://sa:***@db:1433/deck");
    }

    #[test]
    fn rejects_unknown_urls_with_help() {
        let err = DatabaseUrl::parse("postgres://x").unwrap_err().to_string();
        assert!(err.contains("sqlite://deck.db"), "{err}");
    }
}
