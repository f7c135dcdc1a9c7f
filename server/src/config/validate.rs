//! Semantic checks on a parsed configuration: ranges, addresses, and settings that only make
//! sense together. Each problem says what is wrong and how to fix it.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use deck_engine::store::open::DatabaseUrl;
use figment::Figment;

use super::load::describe_source;
use super::{HttpSettings, MAX_BODY_BYTES, Settings};

/// One thing wrong with the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key (`engine.poll_interval`), or the flag that carried it.
    pub key: String,
    pub message: String,
    pub help: String,
    /// Where the value came from (file path, environment variable), when known.
    pub source: Option<String>,
}

impl Problem {
    pub fn new(
        key: impl Into<String>,
        message: impl Into<String>,
        help: impl Into<String>,
    ) -> Self {
        Problem {
            key: key.into(),
            message: message.into(),
            help: help.into(),
            source: None,
        }
    }

    /// `section`: the table the error was extracted from (`extract_inner` appends it to the
    /// end of the error's path, so it is put back in front here).
    pub(super) fn from_figment(
        e: &figment::Error,
        figment: &Figment,
        section: Option<&str>,
    ) -> Self {
        let mut path: Vec<&str> = e.path.iter().map(String::as_str).collect();
        if let Some(section) = section {
            if path.last() == Some(&section) {
                path.pop();
            }
            path.insert(0, section);
        }
        let key = path.join(".");
        let source = e
            .metadata
            .as_ref()
            .map(|m| describe_source(m, &key))
            .or_else(|| {
                figment
                    .find_metadata(&key)
                    .map(|m| describe_source(m, &key))
            });
        let help = match &e.kind {
            figment::error::Kind::InvalidType(..) | figment::error::Kind::InvalidValue(..) => {
                "fix the value's type (README → Configuration lists each key with an example)"
            }
            figment::error::Kind::Message(m) if m.contains("TOML") || m.contains("parse") => {
                "fix the file's TOML syntax"
            }
            figment::error::Kind::Message(_) => {
                "fix the value (README → Configuration lists each key)"
            }
            _ => "see README → Configuration",
        };
        Problem {
            key: if key.is_empty() {
                "config".to_string()
            } else {
                key
            },
            message: e.kind.to_string(),
            help: help.to_string(),
            source,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.key)?;
        if let Some(source) = &self.source {
            write!(f, " (from {source})")?;
        }
        write!(f, ": {}\n    help: {}", self.message, self.help)
    }
}

pub(super) fn validate(s: &Settings, problems: &mut Vec<Problem>, warnings: &mut Vec<String>) {
    let mut problem = |key: &str, message: String, help: String| {
        problems.push(Problem::new(key, message, help));
    };

    if let Err(e) = DatabaseUrl::parse(&s.database) {
        problem(
            "database",
            format!("{:?} is not a database URL we can use", s.database),
            format!("{e}"),
        );
    }
    if let Err(e) = s.listen.parse::<SocketAddr>() {
        problem(
            "listen",
            format!("{:?} is not an IP:PORT address ({e})", s.listen),
            "use an address such as 127.0.0.1:8080 (this machine only) or 0.0.0.0:8080 (every \
             interface)"
                .into(),
        );
    }

    // The engine holds its configuration to its own rules (and logs their warnings when it
    // starts); here its problems are named as the file writes them.
    for p in s.engine.check().problems {
        problem(&format!("engine.{}", p.key), p.problem, p.help);
    }

    for (name, queue) in &s.queues {
        if let Err(e) = deck_engine::validation::validate_name("queue", name) {
            problem(&format!("queues.{name}"), e.problem, e.help);
        }
        if let Err(e) = deck_engine::validation::validate_queue_patch(&queue.patch()) {
            problem(&format!("queues.{name}.{}", e.field), e.problem, e.help);
        }
    }

    for (i, entry) in s.schedules.iter().flatten().enumerate() {
        if let Err(e) = entry.definition() {
            problem(&format!("schedules[{i}].{}", e.key), e.problem, e.help);
        }
        let first = s
            .schedules
            .iter()
            .flatten()
            .position(|o| o.name == entry.name);
        if first.is_some_and(|f| f < i) {
            problem(
                &format!("schedules[{i}].name"),
                format!("{:?} is declared twice", entry.name),
                "give every schedule its own name".into(),
            );
        }
    }

    let handlers = deck_http_handlers::check(&s.handlers, &|var| std::env::var(var).ok());
    for p in handlers.problems {
        problem(&p.key, p.problem, p.help);
    }
    warnings.extend(handlers.warnings);

    validate_http(&s.http, &mut problem, warnings);

    if s.store.pool_size == 0 {
        problem(
            "store.pool_size",
            "0 connections cannot serve anything".into(),
            "use 1 or more (default 10)".into(),
        );
    }
    if s.store.sqlite_readers == 0 {
        problem(
            "store.sqlite_readers",
            "0 read connections cannot serve anything".into(),
            "use 1 or more (default 4)".into(),
        );
    }
    let schema_ok = !s.store.schema.is_empty()
        && s.store.schema.len() <= 128
        && s.store
            .schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.store.schema.starts_with(|c: char| c.is_ascii_digit());
    if !schema_ok {
        problem(
            "store.schema",
            format!("{:?} is not a plain SQL identifier", s.store.schema),
            "use letters, digits and underscores (up to 128, not starting with a digit), \
             e.g. deck"
                .into(),
        );
    }
}

const MIN_HTTP_TIMEOUT: Duration = Duration::from_secs(1);
const MAX_HTTP_TIMEOUT: Duration = Duration::from_secs(3600);
const MAX_CONNECTIONS: u32 = 1_000_000;
const MIN_BODY_BYTES: u64 = 1024;

fn validate_http(
    h: &HttpSettings,
    problem: &mut impl FnMut(&str, String, String),
    warnings: &mut Vec<String>,
) {
    for (key, value) in [
        ("http.header_read_timeout", h.header_read_timeout),
        ("http.request_body_timeout", h.request_body_timeout),
    ] {
        if !(MIN_HTTP_TIMEOUT..=MAX_HTTP_TIMEOUT).contains(&value) {
            problem(
                key,
                format!("{} is out of range", human(value)),
                format!(
                    "use {} to {}; shorter cuts off honest clients on slow links, longer lets \
                     stalled clients hold connections",
                    human(MIN_HTTP_TIMEOUT),
                    human(MAX_HTTP_TIMEOUT)
                ),
            );
        }
    }
    if let Some(url) = &h.public_url {
        let ok = url.starts_with("http://") || url.starts_with("https://");
        if !ok || url.ends_with('/') || url.contains(char::is_whitespace) {
            problem(
                "http.public_url",
                format!("{url:?} is not an http(s) URL without a trailing slash"),
                "give the URL receivers reach this deck at, e.g. https://deck.internal:8080".into(),
            );
        }
    }
    if h.max_connections == 0 || h.max_connections > MAX_CONNECTIONS {
        problem(
            "http.max_connections",
            format!("{} is out of range", h.max_connections),
            format!(
                "use 1 to {MAX_CONNECTIONS} (default 1024), and keep it below the process's \
                 open-files limit (ulimit -n)"
            ),
        );
    }
    if !(MIN_BODY_BYTES..=MAX_BODY_BYTES).contains(&h.max_body_bytes) {
        problem(
            "http.max_body_bytes",
            format!("{} is out of range", h.max_body_bytes),
            format!(
                "use {MIN_BODY_BYTES} to {MAX_BODY_BYTES} bytes (default {MAX_BODY_BYTES} = \
                 32 MiB, the batch limit; no endpoint accepts more)"
            ),
        );
    } else if h.max_body_bytes < deck_api::SINGLE_BODY_LIMIT as u64 {
        warnings.push(format!(
            "http.max_body_bytes = {} is below one maximal job ({} bytes): jobs with payloads \
             near the 1 MiB limit will be refused with 413",
            h.max_body_bytes,
            deck_api::SINGLE_BODY_LIMIT
        ));
    }
}

fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(f: impl FnOnce(&mut Settings)) -> (Vec<Problem>, Vec<String>) {
        let mut s = Settings::default();
        f(&mut s);
        let (mut p, mut w) = (Vec::new(), Vec::new());
        validate(&s, &mut p, &mut w);
        (p, w)
    }

    #[test]
    fn defaults_are_valid() {
        let (p, w) = check(|_| {});
        assert!(p.is_empty(), "{p:?}");
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn poll_interval_below_100ms_is_rejected_as_engine_poll_interval() {
        let (p, _) = check(|s| s.engine.poll_interval = Duration::from_millis(99));
        assert_eq!(p[0].key, "engine.poll_interval");
        let (p, _) = check(|s| s.engine.poll_interval = Duration::from_millis(100));
        assert!(p.is_empty());
        let (p, _) = check(|s| s.engine.poll_interval = Duration::from_secs(11));
        assert!(
            p.is_empty(),
            "a long poll is the engine's warning, not a problem"
        );
    }

    #[test]
    fn unparsable_listen_address_is_rejected_with_an_example() {
        let (p, _) = check(|s| s.listen = "localhost".into());
        assert_eq!(p[0].key, "listen");
        assert!(p[0].help.contains("127.0.0.1:8080"));
    }

    #[test]
    fn related_timeouts_are_checked_together() {
        let (p, _) = check(|s| {
            s.engine.heartbeat_interval = Duration::from_secs(10);
            s.engine.rescue.default_zombie_timeout = Duration::from_secs(15);
        });
        assert_eq!(p[0].key, "engine.rescue.zombie_timeout");
        let (p, _) = check(|s| s.engine.rescue.dead_instance_timeout = Duration::from_secs(6));
        assert_eq!(p[0].key, "engine.rescue.dead_instance_timeout");
    }

    #[test]
    fn http_bounds_are_checked() {
        let (p, _) = check(|s| {
            s.http.header_read_timeout = Duration::from_millis(500);
            s.http.request_body_timeout = Duration::from_secs(2 * 3600);
            s.http.max_connections = 0;
            s.http.max_body_bytes = MAX_BODY_BYTES + 1;
        });
        let keys: Vec<_> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "http.header_read_timeout",
                "http.request_body_timeout",
                "http.max_connections",
                "http.max_body_bytes"
            ]
        );
        let (p, w) = check(|s| s.http.max_body_bytes = 64 * 1024);
        assert!(p.is_empty(), "{p:?}");
        assert!(w[0].contains("http.max_body_bytes"), "{w:?}");
    }

    #[test]
    fn a_reader_pool_of_none_is_rejected() {
        let (p, _) = check(|s| s.store.sqlite_readers = 0);
        assert_eq!(p[0].key, "store.sqlite_readers");
        let (p, _) = check(|s| s.store.sqlite_readers = 1);
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn bad_database_queue_and_schema_names_are_rejected() {
        let (p, _) = check(|s| {
            s.database = "postgres://x".into();
            s.engine.queues = Some(vec![" padded".into()]);
            s.store.schema = "deck; drop".into();
        });
        let keys: Vec<_> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["database", "engine.queues", "store.schema"]);
    }
}
