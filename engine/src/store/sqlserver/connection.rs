//! Turning what an operator typed into a driver configuration: an ADO-style connection string
//! (`Server=tcp:host,1433;Database=deck;User Id=…;Password=…;TrustServerCertificate=true`) or an
//! `mssql://user:password@host:port/database?trust_server_certificate=true` URL, plus the schema
//! name, the one identifier this store ever splices into SQL.

use tiberius::{AuthMethod, Config, EncryptionLevel};

use crate::error::{StoreError, StoreResult};
use crate::store::open::DatabaseUrl;
use crate::validation::ValidationError;

/// Longest SQL Server identifier (`sysname`).
pub const MAX_IDENTIFIER_CHARS: usize = 128;

/// A schema name safe to splice into SQL: ASCII letters, digits and underscores, not starting
/// with a digit, 1–128 characters. Anything else is refused rather than quoted, so no value a
/// user controls can change the shape of a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaName(String);

impl SchemaName {
    pub fn parse(name: &str) -> Result<Self, ValidationError> {
        let help = "use letters, digits and underscores, not starting with a digit, \
                    at most 128 characters (for example: deck)";
        if name.is_empty() {
            return Err(ValidationError::new("schema", "is empty", help));
        }
        if name.chars().count() > MAX_IDENTIFIER_CHARS {
            return Err(ValidationError::new(
                "schema",
                format!("is {} characters long", name.chars().count()),
                help,
            ));
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
        {
            return Err(ValidationError::new(
                "schema",
                format!("{name:?} contains {bad:?}"),
                help,
            ));
        }
        if name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(ValidationError::new(
                "schema",
                format!("{name:?} starts with a digit"),
                help,
            ));
        }
        Ok(SchemaName(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SchemaName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The connection text with its password hidden, for every message that quotes it.
pub fn redacted(connection: &str) -> String {
    DatabaseUrl::SqlServer {
        connection: connection.to_string(),
    }
    .redacted()
}

fn config_error(connection: &str, cause: impl Into<String>, help: impl Into<String>) -> StoreError {
    StoreError::Config {
        url: redacted(connection),
        cause: cause.into(),
        help: help.into(),
    }
}

const ADO_EXAMPLE: &str = "Server=tcp:host,1433;Database=deck;User Id=deck;Password=…;\
                           TrustServerCertificate=true";
const URL_EXAMPLE: &str = "mssql://deck:password@host:1433/deck?trust_server_certificate=true";

/// Parse either form into a driver configuration.
pub fn parse_connection(connection: &str) -> StoreResult<Config> {
    let trimmed = connection.trim();
    let lower = trimmed.to_ascii_lowercase();
    let mut config = if lower.starts_with("mssql://") || lower.starts_with("sqlserver://") {
        parse_url(trimmed)?
    } else {
        parse_ado(trimmed)?
    };
    config.application_name("deck");
    Ok(config)
}

fn parse_ado(connection: &str) -> StoreResult<Config> {
    let mut has_server = false;
    let mut has_database = false;
    for part in connection.split(';').filter(|p| !p.trim().is_empty()) {
        let Some((key, value)) = part.split_once('=') else {
            return Err(config_error(
                connection,
                format!("{:?} is not a key=value pair", part.trim()),
                format!(
                    "separate settings with ';' and write each as key=value, e.g. {ADO_EXAMPLE}"
                ),
            ));
        };
        let key = key.trim().to_ascii_lowercase().replace(' ', "");
        let value = value.trim();
        match key.as_str() {
            "server" | "datasource" | "address" | "addr" | "networkaddress" => {
                has_server = !value.is_empty()
            }
            "database" | "initialcatalog" => has_database = !value.is_empty(),
            _ => {}
        }
    }
    if !has_server {
        return Err(config_error(
            connection,
            "the connection string names no server",
            format!("add Server=tcp:host,1433, e.g. {ADO_EXAMPLE}"),
        ));
    }
    if !has_database {
        return Err(config_error(
            connection,
            "the connection string names no database",
            format!(
                "add Database=<name> (the database must exist; deck creates only its schema), \
                 e.g. {ADO_EXAMPLE}"
            ),
        ));
    }
    Config::from_ado_string(connection).map_err(|e| {
        config_error(
            connection,
            e.to_string(),
            format!("write it like {ADO_EXAMPLE}"),
        )
    })
}

fn percent_decode(connection: &str, what: &str, text: &str) -> StoreResult<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).unwrap_or("");
            let byte = u8::from_str_radix(hex, 16).map_err(|_| {
                config_error(
                    connection,
                    format!("the {what} has a bad percent escape"),
                    "escape special characters as %XX (for example @ as %40)",
                )
            })?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| {
        config_error(
            connection,
            format!("the {what} is not UTF-8 after percent-decoding"),
            "escape only UTF-8 text",
        )
    })
}

fn parse_bool(connection: &str, key: &str, value: &str) -> StoreResult<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Ok(true),
        "false" | "no" | "0" => Ok(false),
        _ => Err(config_error(
            connection,
            format!("{key}={value} is not a boolean"),
            format!("write {key}=true or {key}=false"),
        )),
    }
}

fn parse_url(connection: &str) -> StoreResult<Config> {
    let (_, rest) = connection.split_once("://").unwrap_or(("", connection));
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match rest.split_once('/') {
        Some((a, p)) => (a, p),
        None => (rest, ""),
    };
    let (credentials, host_port) = match authority.rsplit_once('@') {
        Some((c, h)) => (Some(c), h),
        None => (None, authority),
    };
    let mut config = Config::new();

    if host_port.is_empty() {
        return Err(config_error(
            connection,
            "the URL names no host",
            format!("write it like {URL_EXAMPLE}"),
        ));
    }
    let (host, port) = match host_port.rsplit_once(':') {
        Some((h, p)) => {
            let port: u16 = p.parse().map_err(|_| {
                config_error(
                    connection,
                    format!("port {p:?} is not a number from 1 to 65535"),
                    format!("write it like {URL_EXAMPLE}"),
                )
            })?;
            (h, Some(port))
        }
        None => (host_port, None),
    };
    // host\instance names a named instance (resolved on its port; SQL Browser is not used).
    match host.split_once('\\') {
        Some((h, instance)) => {
            config.host(percent_decode(connection, "host", h)?);
            config.instance_name(percent_decode(connection, "instance", instance)?);
        }
        None => config.host(percent_decode(connection, "host", host)?),
    }
    config.port(port.unwrap_or(1433));

    let database = percent_decode(connection, "database", path.trim_end_matches('/'))?;
    if database.is_empty() {
        return Err(config_error(
            connection,
            "the URL names no database",
            format!(
                "put the database after the host (it must exist; deck creates only its schema), \
                 e.g. {URL_EXAMPLE}"
            ),
        ));
    }
    config.database(database);

    match credentials {
        Some(c) => {
            let (user, password) = c.split_once(':').unwrap_or((c, ""));
            let user = percent_decode(connection, "user name", user)?;
            let password = percent_decode(connection, "password", password)?;
            if user.is_empty() {
                return Err(config_error(
                    connection,
                    "the URL has an empty user name",
                    format!("write it like {URL_EXAMPLE}"),
                ));
            }
            config.authentication(AuthMethod::sql_server(user, password));
        }
        None => {
            return Err(config_error(
                connection,
                "the URL names no login",
                format!("put user:password@ before the host, e.g. {URL_EXAMPLE}"),
            ));
        }
    }

    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, "true"));
        let value = percent_decode(connection, key, value)?;
        match key.to_ascii_lowercase().replace('-', "_").as_str() {
            "trust_server_certificate" | "trustservercertificate" => {
                if parse_bool(connection, key, &value)? {
                    config.trust_cert();
                }
            }
            "encrypt" => match value.to_ascii_lowercase().as_str() {
                "true" | "yes" | "required" | "strict" | "mandatory" => {
                    config.encryption(EncryptionLevel::Required)
                }
                "false" | "no" | "off" => config.encryption(EncryptionLevel::Off),
                "not_supported" | "none" => config.encryption(EncryptionLevel::NotSupported),
                _ => {
                    return Err(config_error(
                        connection,
                        format!("encrypt={value} is not understood"),
                        "write encrypt=true, encrypt=false or encrypt=not_supported",
                    ));
                }
            },
            "application_name" | "app" => config.application_name(value),
            "trust_server_certificate_ca" | "ca" => config.trust_cert_ca(value),
            other => {
                return Err(config_error(
                    connection,
                    format!("unknown URL option {other:?}"),
                    "supported options: trust_server_certificate, encrypt, application_name, \
                     trust_server_certificate_ca",
                ));
            }
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(connection: &str) -> String {
        parse_connection(connection).unwrap_err().to_string()
    }

    #[test]
    fn parses_an_ado_string() {
        let config = parse_connection(
            "Server=tcp:db.example.com,1433;Database=deck;User Id=deck;Password=s3cret;TrustServerCertificate=true",
        )
        .unwrap();
        assert_eq!(config.get_addr(), "db.example.com:1433");
    }

    #[test]
    fn parses_a_url() {
        let config = parse_connection(
            "mssql://deck:p%40ss@db.example.com:14330/jobs?trust_server_certificate=true",
        )
        .unwrap();
        assert_eq!(config.get_addr(), "db.example.com:14330");
        let config = parse_connection("sqlserver://sa:pw@localhost/deck").unwrap();
        assert_eq!(config.get_addr(), "localhost:1433");
    }

    #[test]
    fn ado_errors_say_what_is_missing_and_hide_the_password() {
        let e = err("Database=deck;User Id=sa;Password=hunter2");
        assert!(e.contains("names no server"), "{e}");
        assert!(e.contains("Server=tcp:host,1433"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        let e = err("Server=tcp:db,1433;User Id=sa;Password=hunter2");
        assert!(e.contains("names no database"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        let e = err("Server=tcp:db,1433;Database=deck;oops");
        assert!(e.contains("not a key=value pair"), "{e}");
    }

    #[test]
    fn url_errors_say_what_is_wrong() {
        assert!(err("mssql://sa:pw@db:notaport/deck").contains("is not a number"));
        assert!(err("mssql://sa:pw@db:1433").contains("names no database"));
        assert!(err("mssql://db:1433/deck").contains("names no login"));
        assert!(err("mssql://sa:pw@/deck").contains("names no host"));
        let e = err("mssql://sa:hunter2@db/deck?colour=blue");
        assert!(e.contains("unknown URL option \"colour\""), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        assert!(
            err("mssql://sa:pw@db/deck?trust_server_certificate=maybe").contains("not a boolean")
        );
        assert!(err("mssql://sa:p%zz@db/deck").contains("percent escape"));
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(SchemaName::parse("deck").is_ok());
        assert!(SchemaName::parse("_jobs_2").is_ok());
        assert!(SchemaName::parse(&"a".repeat(128)).is_ok());
        for bad in [
            "",
            "1deck",
            "deck-jobs",
            "deck]; DROP TABLE x; --",
            "dëck",
            "de ck",
        ] {
            let e = SchemaName::parse(bad).unwrap_err();
            assert_eq!(e.field, "schema");
            assert!(
                e.help.contains("letters, digits and underscores"),
                "{bad}: {e}"
            );
        }
        let e = SchemaName::parse(&"a".repeat(129)).unwrap_err();
        assert!(e.problem.contains("129"), "{e}");
    }
}
