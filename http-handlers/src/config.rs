//! `[[handlers]]`: which jobs go to which endpoint, and how.

use std::time::Duration;

use deck_engine::config::values;
use deck_engine::validation::validate_name;
use serde::{Deserialize, Serialize};

/// Requests one endpoint may have in flight by default.
pub const DEFAULT_CONCURRENCY: u32 = 10;
/// Most requests in flight to one endpoint.
pub const MAX_CONCURRENCY: u32 = 10_000;

/// One endpoint and the jobs it takes. Only operators configure URLs (in `deck.toml` or in
/// code), never job payloads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpHandlerConfig {
    /// Job types it takes: `email.send`, a prefix `email.*`, or `*`.
    #[serde(default)]
    pub types: Vec<String>,
    /// Whole queues it takes (any type without a handler of its own).
    #[serde(default)]
    pub queues: Vec<String>,
    /// Where each job is POSTed (`http://` or `https://`).
    pub url: String,
    /// How long one request may take; past it the attempt failed transiently.
    #[serde(default = "default_timeout", with = "values::duration")]
    pub timeout: Duration,
    /// Requests in flight to this endpoint at most; more jobs wait for a free slot.
    #[serde(default = "default_concurrency")]
    pub concurrency: u32,
    /// The environment variable holding the signing secret (HMAC-SHA256 of each request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_concurrency() -> u32 {
    DEFAULT_CONCURRENCY
}

impl HttpHandlerConfig {
    /// An endpoint for these type patterns, with the defaults.
    pub fn new(url: impl Into<String>, types: &[&str]) -> Self {
        HttpHandlerConfig {
            types: types.iter().map(|t| t.to_string()).collect(),
            queues: Vec::new(),
            url: url.into(),
            timeout: default_timeout(),
            concurrency: DEFAULT_CONCURRENCY,
            secret_env: None,
        }
    }
}

/// One thing wrong with a `[[handlers]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerProblem {
    /// `handlers[0].url`.
    pub key: String,
    pub problem: String,
    pub help: String,
}

impl std::fmt::Display for HandlerProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}; {}", self.key, self.problem, self.help)
    }
}

/// Every problem of every entry, and warnings (unsigned endpoints).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HandlersReport {
    pub problems: Vec<HandlerProblem>,
    pub warnings: Vec<String>,
}

/// Check the entries as `deck.toml` names them (`handlers[i].…`); `env` reads a variable.
pub fn check(
    configs: &[HttpHandlerConfig],
    env: &dyn Fn(&str) -> Option<String>,
) -> HandlersReport {
    let mut report = HandlersReport::default();
    let mut problem = |key: String, problem: String, help: &str| {
        report.problems.push(HandlerProblem {
            key,
            problem,
            help: help.to_string(),
        })
    };
    let mut warnings = Vec::new();
    for (i, c) in configs.iter().enumerate() {
        let at = |field: &str| format!("handlers[{i}].{field}");
        if c.types.is_empty() && c.queues.is_empty() {
            problem(
                at("types"),
                "neither types nor queues is given, so no job would go to this endpoint".into(),
                "add types = [\"email.*\"] (type keys, prefixes ending in *) or queues = [\"mail\"]",
            );
        }
        for t in &c.types {
            let star = t.find('*');
            if star.is_some_and(|at| at + 1 != t.len()) {
                problem(
                    at("types"),
                    format!("{t:?} has a * that is not at the end"),
                    "use a type key (email.send), a prefix ending in * (email.*), or *",
                );
            } else if t != "*"
                && let Err(e) = validate_name("type", t.trim_end_matches('*'))
            {
                problem(at("types"), format!("{t:?} {}", e.problem), &e.help);
            }
        }
        for q in &c.queues {
            if let Err(e) = validate_name("queue", q) {
                problem(at("queues"), format!("{q:?} {}", e.problem), &e.help);
            }
        }
        match reqwest::Url::parse(&c.url) {
            Err(e) => problem(
                at("url"),
                format!("{:?} is not a URL ({e})", c.url),
                "give a full URL such as http://mailer.internal:8080/jobs/email",
            ),
            Ok(url) if !matches!(url.scheme(), "http" | "https") => problem(
                at("url"),
                format!("{:?} is not an http or https URL", c.url),
                "use http:// or https://",
            ),
            Ok(url) if !url.username().is_empty() || url.password().is_some() => problem(
                at("url"),
                "has credentials in it, which would show in logs and the console".into(),
                "remove them; requests are signed with the secret named by secret_env",
            ),
            Ok(_) => {}
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&c.timeout) {
            problem(
                at("timeout"),
                format!("{:?} is out of range", c.timeout),
                "use 100ms to 1h (default 30s); the job's execution timeout still applies",
            );
        }
        if c.concurrency == 0 || c.concurrency > MAX_CONCURRENCY {
            problem(
                at("concurrency"),
                format!("{} is out of range", c.concurrency),
                "use 1 to 10000 (default 10)",
            );
        }
        match &c.secret_env {
            Some(var) => match env(var) {
                Some(secret) if !secret.is_empty() => {
                    if secret.len() < 16 {
                        warnings.push(format!(
                            "{} is shorter than 16 characters: a short secret is easy to guess",
                            at("secret_env")
                        ));
                    }
                }
                _ => problem(
                    at("secret_env"),
                    format!("the environment variable {var} is not set or empty"),
                    "export it with the endpoint's signing secret before starting deck",
                ),
            },
            None => warnings.push(format!(
                "{}: requests to {} are not signed; set secret_env so the receiver can \
                 tell they come from deck",
                at("secret_env"),
                c.url
            )),
        }
    }
    report.warnings = warnings;
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(configs: &[HttpHandlerConfig], env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
        check(configs, env)
            .problems
            .into_iter()
            .map(|p| p.key)
            .collect()
    }

    #[test]
    fn a_good_entry_passes_and_an_unsigned_one_is_warned() {
        let none = |_: &str| None;
        let c = HttpHandlerConfig::new("http://localhost:9000/jobs", &["email.*"]);
        let report = check(std::slice::from_ref(&c), &none);
        assert!(report.problems.is_empty(), "{report:?}");
        assert!(report.warnings[0].contains("not signed"), "{report:?}");
    }

    #[test]
    fn every_bad_field_is_named() {
        let none = |_: &str| None;
        let c = HttpHandlerConfig {
            types: vec!["a*b".into()],
            queues: vec![" padded".into()],
            url: "ftp://x".into(),
            timeout: Duration::ZERO,
            concurrency: 0,
            secret_env: Some("DECK_TEST_UNSET_SECRET".into()),
        };
        assert_eq!(
            keys(&[c], &none),
            [
                "handlers[0].types",
                "handlers[0].queues",
                "handlers[0].url",
                "handlers[0].timeout",
                "handlers[0].concurrency",
                "handlers[0].secret_env"
            ]
        );
        let nothing = HttpHandlerConfig::new("http://user:pw@x/", &[]);
        assert_eq!(
            keys(&[nothing], &none),
            ["handlers[0].types", "handlers[0].url"]
        );
    }

    #[test]
    fn a_set_secret_is_accepted() {
        let env = |v: &str| (v == "MAILER_SECRET").then(|| "0123456789abcdef0123".to_string());
        let mut c = HttpHandlerConfig::new("https://mailer/jobs", &["email.send"]);
        c.secret_env = Some("MAILER_SECRET".into());
        let report = check(&[c], &env);
        assert!(
            report.problems.is_empty() && report.warnings.is_empty(),
            "{report:?}"
        );
    }

    #[test]
    fn reads_the_documented_toml_shape() {
        let c: HttpHandlerConfig = serde_json::from_value(serde_json::json!({
            "types": ["email.*"],
            "url": "http://mailer.internal:8080/jobs/email",
            "timeout": "30s",
            "concurrency": 20,
            "secret_env": "MAILER_SECRET"
        }))
        .unwrap();
        assert_eq!(c.concurrency, 20);
        assert_eq!(c.timeout, Duration::from_secs(30));
        let err = serde_json::from_value::<HttpHandlerConfig>(serde_json::json!({
            "url": "http://x", "typos": ["a"]
        }))
        .unwrap_err();
        assert!(err.to_string().contains("typos"), "{err}");
    }
}
