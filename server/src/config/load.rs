//! Layer the sources (file < environment < flags) and collect every problem in one pass, so
//! an operator fixes the whole configuration after one failed start, not one key per restart.

use std::fmt;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::value::{Dict, Value};
use figment::{Figment, Metadata};
use serde::de::DeserializeOwned;

use super::validate::{Problem, validate};
use super::{AuthSettings, DEFAULT_CONFIG_FILE, EngineSettings, HttpSettings, Settings};
use deck_engine::StoreOptions;

/// Environment variables read as configuration: `DECK_DATABASE`, `DECK_ENGINE__POLL_INTERVAL`
/// (a double underscore nests).
pub const ENV_PREFIX: &str = "DECK_";

/// `DECK_…` variables that are not configuration keys: the log filter, the config file path
/// (a flag's environment fallback) and test hooks.
const ENV_NOT_SETTINGS: &[&str] = &["log", "log_format", "config"];
const ENV_NOT_SETTINGS_PREFIX: &str = "test_";

/// Where the configuration comes from.
#[derive(Debug, Default, Clone)]
pub struct ConfigSources {
    /// `--config FILE`: must exist. `None` reads `deck.toml` when it exists.
    pub file: Option<PathBuf>,
    /// Values from command-line flags, by dotted key (`engine.workers`), highest precedence.
    pub overrides: Vec<(String, Value)>,
}

impl ConfigSources {
    pub fn set(&mut self, key: &str, value: impl Into<Value>) {
        self.overrides.push((key.to_string(), value.into()));
    }

    pub fn set_opt<V: Into<Value>>(&mut self, key: &str, value: Option<V>) {
        if let Some(v) = value {
            self.set(key, v);
        }
    }
}

/// A configuration that passed every check.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub settings: Settings,
    /// Accepted but probably unintended (`poll_interval` over 10 s, ...): log them.
    pub warnings: Vec<String>,
    /// The file that was read, if any.
    pub file: Option<PathBuf>,
}

/// Every problem found in the configuration.
#[derive(Debug, Clone)]
pub struct ConfigError {
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "the configuration has {n} problem{}:",
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

pub fn load(sources: &ConfigSources) -> Result<Loaded, ConfigError> {
    let file = match &sources.file {
        Some(path) if !path.is_file() => {
            return Err(ConfigError {
                problems: vec![Problem::new(
                    "--config",
                    format!("config file {} does not exist", path.display()),
                    "check the path, or leave --config out to use deck.toml when present and \
                     the defaults otherwise",
                )],
            });
        }
        Some(path) => Some(path.clone()),
        None => Some(PathBuf::from(DEFAULT_CONFIG_FILE)).filter(|p| p.is_file()),
    };

    let figment = figment(file.as_deref(), &sources.overrides);

    // Syntax errors (a broken TOML file) stop here: nothing below can be trusted.
    let merged: Dict = match figment.extract() {
        Ok(d) => d,
        Err(e) => {
            return Err(ConfigError {
                problems: vec![Problem::from_figment(&e, &figment, None)],
            });
        }
    };

    let mut problems = Vec::new();
    unknown_keys(&figment, &merged, &mut problems);

    // Extract section by section so a type error in one does not hide those in another.
    let defaults = Settings::default();
    let mut settings = defaults.clone();
    #[derive(serde::Deserialize)]
    #[serde(default)]
    struct TopLevel {
        database: String,
        listen: String,
        demo: bool,
    }
    impl Default for TopLevel {
        fn default() -> Self {
            let d = Settings::default();
            TopLevel {
                database: d.database,
                listen: d.listen,
                demo: d.demo,
            }
        }
    }
    if let Some(top) = section::<TopLevel>(&figment, None, &mut problems) {
        settings.database = top.database;
        settings.listen = top.listen;
        settings.demo = top.demo;
    }
    if let Some(store) = section::<StoreOptions>(&figment, Some("store"), &mut problems) {
        settings.store = store;
    }
    if let Some(engine) = section::<EngineSettings>(&figment, Some("engine"), &mut problems) {
        settings.engine = engine;
    }
    if let Some(auth) = section::<AuthSettings>(&figment, Some("auth"), &mut problems) {
        settings.auth = auth;
    }
    if let Some(http) = section::<HttpSettings>(&figment, Some("http"), &mut problems) {
        settings.http = http;
    }

    let mut warnings = Vec::new();
    let first_semantic = problems.len();
    validate(&settings, &mut problems, &mut warnings);
    for p in &mut problems[first_semantic..] {
        if p.source.is_none() {
            p.source = figment
                .find_metadata(&p.key)
                .map(|m| describe_source(m, &p.key));
        }
    }
    // A key that failed to parse was validated with its default: drop echoes of it.
    problems.dedup_by(|a, b| a.key == b.key && a.source.is_none());

    if problems.is_empty() {
        Ok(Loaded {
            settings,
            warnings,
            file,
        })
    } else {
        Err(ConfigError { problems })
    }
}

fn figment(file: Option<&Path>, overrides: &[(String, Value)]) -> Figment {
    let mut figment = Figment::new();
    if let Some(path) = file {
        figment = figment.merge(Toml::file_exact(path));
    }
    figment = figment.merge(Env::prefixed(ENV_PREFIX).split("__").filter(|k| {
        let k = k.as_str().to_ascii_lowercase();
        !ENV_NOT_SETTINGS.contains(&k.as_str()) && !k.starts_with(ENV_NOT_SETTINGS_PREFIX)
    }));
    for (key, value) in overrides {
        figment = figment.merge(Serialized::default(key, value.clone()));
    }
    figment
}

fn section<T: DeserializeOwned>(
    figment: &Figment,
    key: Option<&str>,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    let result = match key {
        Some(k) if figment.find_value(k).is_ok() => figment.extract_inner::<T>(k),
        Some(_) => return None,
        None => figment.extract::<T>(),
    };
    match result {
        Ok(v) => Some(v),
        Err(errors) => {
            for e in errors {
                // Unknown keys were already reported, with suggestions, by `unknown_keys`.
                if !matches!(e.kind, figment::error::Kind::UnknownField(..)) {
                    problems.push(Problem::from_figment(&e, figment, key));
                }
            }
            None
        }
    }
}

/// Report every key that no setting reads, with where it came from and the closest known key.
fn unknown_keys(figment: &Figment, merged: &Dict, problems: &mut Vec<Problem>) {
    let known = match Value::serialize(Settings::default()) {
        Ok(Value::Dict(_, d)) => d,
        _ => return,
    };
    let mut all_known = Vec::new();
    collect_keys(&known, "", &mut all_known);
    let mut unknown = Vec::new();
    walk_unknown(merged, &known, "", &mut unknown);
    for key in unknown {
        let source = figment
            .find_metadata(&key)
            .map(|m| describe_source(m, &key));
        let help = match closest(&key, &all_known) {
            Some(k) => {
                format!("did you mean `{k}`? (every key is listed in README → Configuration)")
            }
            None => "remove it; every key is listed in README → Configuration".to_string(),
        };
        problems.push(Problem {
            key: key.clone(),
            message: "is not a known setting".to_string(),
            help,
            source,
        });
    }
}

fn walk_unknown(given: &Dict, known: &Dict, prefix: &str, out: &mut Vec<String>) {
    for (k, v) in given {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match known.get(k) {
            None => out.push(path),
            // Descend only where the defaults are a table: a table whose default is empty
            // may be open-ended (maps), which the section's own deserializer judges.
            Some(Value::Dict(_, kd)) if !kd.is_empty() => {
                if let Value::Dict(_, gd) = v {
                    walk_unknown(gd, kd, &path, out);
                }
            }
            Some(_) => {}
        }
    }
}

fn collect_keys(d: &Dict, prefix: &str, out: &mut Vec<String>) {
    for (k, v) in d {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if let Value::Dict(_, inner) = v {
            collect_keys(inner, &path, out);
        }
        out.push(path);
    }
}

/// The known key with the smallest edit distance, if it is close enough to be a typo.
fn closest(key: &str, known: &[String]) -> Option<String> {
    let leaf = |k: &str| k.rsplit('.').next().unwrap_or(k).to_string();
    known
        .iter()
        .map(|k| {
            (
                edit_distance(&leaf(key), &leaf(k)).min(edit_distance(key, k)),
                k,
            )
        })
        .filter(|(d, _)| *d <= 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.clone())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

pub(super) fn describe_source(meta: &Metadata, key: &str) -> String {
    match &meta.source {
        Some(figment::Source::File(path)) => path.display().to_string(),
        _ if meta.name.contains("environment") => {
            format!(
                "environment variable {ENV_PREFIX}{}",
                key.replace('.', "__").to_ascii_uppercase()
            )
        }
        // Only flags are merged as serialized values.
        _ => "the command line".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::result_large_err)] // figment's Jail API fixes the error type
    fn load_with(
        file: &str,
        env: &[(&str, &str)],
        flags: &[(&str, Value)],
    ) -> Result<Loaded, ConfigError> {
        let mut result = None;
        figment::Jail::expect_with(|jail| {
            jail.create_file("deck.toml", file)?;
            for (k, v) in env {
                jail.set_env(k, v);
            }
            let mut sources = ConfigSources::default();
            for (k, v) in flags {
                sources.set(k, v.clone());
            }
            result = Some(load(&sources));
            Ok(())
        });
        result.unwrap()
    }

    #[test]
    fn an_empty_file_gives_the_defaults() {
        let loaded = load_with("", &[], &[]).unwrap();
        assert_eq!(loaded.settings, Settings::default());
        assert!(loaded.warnings.is_empty());
    }

    #[test]
    fn flags_beat_environment_beats_file() {
        let file = "database = \"sqlite://file.db\"\nlisten = \"127.0.0.1:1\"\n[engine]\nprefetch = 7\nworkers = 2\n";
        let env = [
            ("DECK_LISTEN", "127.0.0.1:2"),
            ("DECK_ENGINE__WORKERS", "3"),
        ];
        let flags = [("engine.workers", Value::from(4u32))];
        let s = load_with(file, &env, &flags).unwrap().settings;
        assert_eq!(s.database, "sqlite://file.db");
        assert_eq!(s.listen, "127.0.0.1:2");
        assert_eq!(s.engine.prefetch, 7);
        assert_eq!(s.engine.workers, Some(4));
    }

    #[test]
    fn durations_and_queue_lists_read_from_file_and_environment() {
        let file = "[engine]\npoll_interval = \"250ms\"\nqueues = [\"a\", \"b\"]\n[engine.rescue]\nzombie_timeout = \"2m\"\n";
        let s = load_with(file, &[], &[]).unwrap().settings;
        assert_eq!(
            s.engine.poll_interval,
            std::time::Duration::from_millis(250)
        );
        assert_eq!(s.engine.queues, Some(vec!["a".into(), "b".into()]));
        assert_eq!(
            s.engine.rescue.zombie_timeout,
            std::time::Duration::from_secs(120)
        );

        let s = load_with("", &[("DECK_ENGINE__QUEUES", "x, y")], &[])
            .unwrap()
            .settings;
        assert_eq!(s.engine.queues, Some(vec!["x".into(), "y".into()]));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let file = "listen = \"nowhere\"\nbogus = 1\n[engine]\npoll_interval = \"50ms\"\npol_interval = \"1s\"\n[store]\npool_size = \"many\"\n";
        let err = load_with(file, &[("DECK_ENGINE__PREFETCH", "lots")], &[]).unwrap_err();
        let keys: Vec<&str> = err.problems.iter().map(|p| p.key.as_str()).collect();
        for expected in [
            "bogus",
            "engine.pol_interval",
            "store.pool_size",
            "engine.prefetch",
            "listen",
        ] {
            assert!(
                keys.contains(&expected),
                "{expected} missing from {keys:?}\n{err}"
            );
        }
        let text = err.to_string();
        assert!(
            text.contains("did you mean `engine.poll_interval`"),
            "{text}"
        );
        assert!(text.contains("DECK_ENGINE__PREFETCH"), "{text}");
    }

    #[test]
    fn a_number_without_unit_is_refused_with_the_fix() {
        let err = load_with("[engine]\npoll_interval = 5\n", &[], &[]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("engine.poll_interval"), "{text}");
        assert!(text.contains("\"5s\""), "{text}");
    }

    #[test]
    fn the_http_table_reads_its_keys_and_names_typos() {
        let file = "[http]\nheader_read_timeout = \"5s\"\nmax_connections = 64\n";
        let s = load_with(file, &[], &[]).unwrap().settings;
        assert_eq!(
            s.http.header_read_timeout,
            std::time::Duration::from_secs(5)
        );
        assert_eq!(s.http.max_connections, 64);
        assert_eq!(
            s.http.max_body_bytes,
            HttpSettings::default().max_body_bytes
        );

        let err = load_with("[http]\nmax_conections = 64\n", &[], &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("did you mean `http.max_connections`"),
            "{err}"
        );
    }

    #[test]
    fn a_broken_toml_file_is_reported_with_its_path() {
        let err = load_with("[engine\n", &[], &[]).unwrap_err();
        assert!(err.to_string().contains("deck.toml"), "{err}");
    }

    #[test]
    fn unrelated_deck_variables_are_not_settings() {
        let env = [
            ("DECK_LOG", "debug"),
            ("DECK_TEST_MSSQL", "x"),
            ("DECK_CONFIG", "deck.toml"),
        ];
        assert!(load_with("", &env, &[]).is_ok());
    }

    #[test]
    fn a_missing_explicit_config_file_is_an_error() {
        let sources = ConfigSources {
            file: Some(PathBuf::from("/nonexistent/deck.toml")),
            overrides: vec![],
        };
        let err = load(&sources).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/deck.toml"), "{err}");
    }

    #[test]
    fn suggestions_find_close_keys_only() {
        let known = vec!["engine.poll_interval".to_string(), "listen".to_string()];
        assert_eq!(
            closest("engine.poll_intervall", &known).as_deref(),
            Some("engine.poll_interval")
        );
        assert_eq!(closest("lisen", &known).as_deref(), Some("listen"));
        assert_eq!(closest("completely_different", &known), None);
    }
}
