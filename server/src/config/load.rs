//! Layer the sources (file < environment < flags) and collect every problem in one pass, so
//! an operator fixes the whole configuration after one failed start, not one key per restart.

use std::fmt;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::value::{Dict, Value};
use figment::{Figment, Metadata};
use serde::de::DeserializeOwned;

use super::validate::{Problem, validate};
use super::{AuthSettings, DEFAULT_CONFIG_FILE, HttpSettings, Settings};
use deck_engine::StoreOptions;

/// Environment variables read as configuration: `DECK_DATABASE`, `DECK_ENGINE__POLL_INTERVAL`
/// (a double underscore nests).
pub const ENV_PREFIX: &str = "DECK_";

/// `DECK_…` variables of deck's own that are not configuration keys: the log filter, the
/// config file path (a flag's environment fallback), the demo's webhook secret, the API token
/// the README's examples and the example workers (`examples/`) read, and test hooks. Not warned
/// about: a shell set up as the README says would otherwise see a warning on every command.
const ENV_NOT_SETTINGS: &[&str] = &[
    "log",
    "log_format",
    "config",
    "token",
    "demo_webhook_secret",
    "dump_sql",
];
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

    let known = KnownKeys::of_defaults();
    let environment = EnvScan::read(&known);
    let figment = figment(file.as_deref(), &environment, &sources.overrides);

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
    unknown_keys(&figment, &merged, &known, &mut problems);

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
    if let Some(engine) =
        section::<deck_engine::EngineConfig>(&figment, Some("engine"), &mut problems)
    {
        settings.engine = engine;
    }
    if figment.find_value("handlers").is_ok() {
        // Entries deny unknown fields themselves (the key walk does not enter arrays), so
        // every error of theirs is reported here, typos included.
        match figment.extract_inner::<Vec<deck_http_handlers::HttpHandlerConfig>>("handlers") {
            Ok(handlers) => settings.handlers = handlers,
            Err(errors) => {
                for e in errors {
                    problems.push(Problem::from_figment(&e, &figment, Some("handlers")));
                }
            }
        }
    }
    if figment.find_value("queues").is_ok() {
        // An open table (queue names are the user's): the key walk does not enter it, so its
        // entries' typos are reported here.
        match figment
            .extract_inner::<std::collections::BTreeMap<String, super::QueueFileSettings>>("queues")
        {
            Ok(queues) => settings.queues = queues,
            Err(errors) => {
                for e in errors {
                    problems.push(Problem::from_figment(&e, &figment, Some("queues")));
                }
            }
        }
    }
    if figment.find_value("schedules").is_ok() {
        // Entries deny unknown fields themselves (the key walk does not enter arrays).
        match figment.extract_inner::<Vec<super::ScheduleFileSettings>>("schedules") {
            Ok(schedules) => settings.schedules = Some(schedules),
            Err(errors) => {
                for e in errors {
                    problems.push(Problem::from_figment(&e, &figment, Some("schedules")));
                }
            }
        }
    }
    if let Some(auth) = section::<AuthSettings>(&figment, Some("auth"), &mut problems) {
        settings.auth = auth;
    }
    if let Some(http) = section::<HttpSettings>(&figment, Some("http"), &mut problems) {
        settings.http = http;
    }

    let mut warnings = environment.warnings(&known);
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

/// Every key a setting reads, from the serialized defaults, so a new setting is known here
/// the moment it has a default.
struct KnownKeys {
    /// Dotted paths of every key and table (`engine`, `engine.rescue.zombie_timeout`).
    all: Vec<String>,
    /// Tables whose default is empty: open-ended maps that their own deserializer judges.
    open_tables: Vec<String>,
    defaults: Dict,
}

impl KnownKeys {
    fn of_defaults() -> Self {
        let defaults = match Value::serialize(Settings::default()) {
            Ok(Value::Dict(_, d)) => d,
            _ => Dict::new(),
        };
        let mut known = KnownKeys {
            all: Vec::new(),
            open_tables: Vec::new(),
            defaults: Dict::new(),
        };
        collect_keys(&defaults, "", &mut known.all, &mut known.open_tables);
        known.defaults = defaults;
        known
    }

    fn contains(&self, key: &str) -> bool {
        self.all.iter().any(|k| k == key)
            || self.open_tables.iter().any(|t| {
                key.strip_prefix(t.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
            })
    }
}

/// The `DECK_…` variables of this process, sorted into settings and the rest.
///
/// Other tools share the prefix (`DECK_TOKEN` in a shell that calls the API, say), so the
/// environment is read for known keys only: a variable that is not a setting is ignored with a
/// warning naming it, never fatal. A file or a flag with an unknown key still is.
struct EnvScan {
    /// Variables (as written) that name no setting.
    ignored: Vec<(String, String)>,
}

impl EnvScan {
    fn read(known: &KnownKeys) -> Self {
        let mut ignored = Vec::new();
        for (name, _) in std::env::vars_os() {
            let Some(name) = name.to_str() else { continue };
            let Some(key) = env_key(name) else { continue };
            if !known.contains(&key) && !deck_reads_itself(&key) {
                ignored.push((name.to_string(), key));
            }
        }
        ignored.sort();
        EnvScan { ignored }
    }

    /// The keys to leave out of the environment provider.
    fn not_settings(&self) -> Vec<String> {
        self.ignored.iter().map(|(_, k)| k.clone()).collect()
    }

    fn warnings(&self, known: &KnownKeys) -> Vec<String> {
        self.ignored
            .iter()
            .map(|(name, key)| {
                let hint = match closest(key, &known.all) {
                    Some(k) => format!(
                        "; did you mean {ENV_PREFIX}{}?",
                        k.replace('.', "__").to_ascii_uppercase()
                    ),
                    None => String::new(),
                };
                format!(
                    "environment variable {name} is not a deck setting and is ignored{hint} \
                     (settings are listed in README → Configuration)"
                )
            })
            .collect()
    }
}

/// `DECK_ENGINE__WORKERS` → `engine.workers`, the way figment's `Env` provider names it.
fn env_key(name: &str) -> Option<String> {
    let prefix = name.get(..ENV_PREFIX.len())?;
    if !prefix.eq_ignore_ascii_case(ENV_PREFIX) {
        return None;
    }
    let key = name[ENV_PREFIX.len()..]
        .to_ascii_lowercase()
        .replace("__", ".");
    (!key.is_empty()).then_some(key)
}

fn deck_reads_itself(key: &str) -> bool {
    ENV_NOT_SETTINGS.contains(&key) || key.starts_with(ENV_NOT_SETTINGS_PREFIX)
}

fn figment(file: Option<&Path>, environment: &EnvScan, overrides: &[(String, Value)]) -> Figment {
    let mut figment = Figment::new();
    if let Some(path) = file {
        figment = figment.merge(Toml::file_exact(path));
    }
    let ignored = environment.not_settings();
    figment = figment.merge(Env::prefixed(ENV_PREFIX).split("__").filter(move |k| {
        let k = k.as_str().to_ascii_lowercase();
        !deck_reads_itself(&k) && !ignored.contains(&k)
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
fn unknown_keys(figment: &Figment, merged: &Dict, known: &KnownKeys, problems: &mut Vec<Problem>) {
    let mut unknown = Vec::new();
    walk_unknown(merged, &known.defaults, "", &mut unknown);
    for key in unknown {
        let source = figment
            .find_metadata(&key)
            .map(|m| describe_source(m, &key));
        let help = match closest(&key, &known.all) {
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

fn collect_keys(d: &Dict, prefix: &str, out: &mut Vec<String>, open_tables: &mut Vec<String>) {
    for (k, v) in d {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if let Value::Dict(_, inner) = v {
            if inner.is_empty() {
                open_tables.push(path.clone());
            }
            collect_keys(inner, &path, out, open_tables);
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
    fn handlers_are_read_from_the_file_and_their_typos_are_named() {
        let file = "[[handlers]]\ntypes = [\"email.*\"]\nurl = \"http://127.0.0.1:9/jobs\"\n\
                    concurrency = 3\n[[handlers]]\nqueues = [\"mail\"]\nurl = \"http://127.0.0.1:9/q\"\n";
        let loaded = load_with(file, &[], &[]).unwrap();
        let h = &loaded.settings.handlers;
        assert_eq!(
            (h.len(), h[0].concurrency, h[1].queues.clone()),
            (2, 3, vec!["mail".to_string()])
        );
        assert!(
            loaded.warnings.iter().any(|w| w.contains("not signed")),
            "{:?}",
            loaded.warnings
        );

        let typo = "[[handlers]]\ntypes = [\"a\"]\nurl = \"http://x/\"\ntimout = \"1s\"\n";
        let err = load_with(typo, &[], &[]).unwrap_err().to_string();
        assert!(err.contains("timout"), "{err}");
        let bad = "[[handlers]]\nurl = \"ftp://x/\"\n";
        let err = load_with(bad, &[], &[]).unwrap_err().to_string();
        assert!(
            err.contains("handlers[0].types") && err.contains("handlers[0].url"),
            "{err}"
        );
    }

    #[test]
    fn schedules_are_read_from_the_file_and_their_mistakes_are_named() {
        let file = "[[schedules]]\nname = \"nightly\"\ncron = \"30 2 * * *\"\n\
                    time_zone = \"Europe/Berlin\"\nqueue = \"reports\"\n\
                    job_type = \"report.generate\"\npayload = { kind = \"daily\", days = 1 }\n\
                    tags = [\"finance\"]\nexpires_after = \"1h\"\nmisfire = \"run_all\"\n\
                    misfire_cap = 3\noverlap = \"skip_while_active\"\n\
                    [[schedules]]\nname = \"tick\"\nevery = \"15m\"\nqueue = \"q\"\n\
                    job_type = \"t\"\n";
        let loaded = load_with(file, &[], &[]).unwrap();
        let defs = loaded.settings.schedule_definitions().expect("declared");
        assert_eq!(defs.len(), 2);
        let nightly = &defs[0];
        assert_eq!(
            nightly.spec,
            deck_engine::ScheduleSpec::Cron("30 2 * * *".into())
        );
        assert_eq!(nightly.time_zone, "Europe/Berlin");
        let payload: serde_json::Value = serde_json::from_str(&nightly.job.payload).unwrap();
        assert_eq!(payload, serde_json::json!({"kind": "daily", "days": 1}));
        assert_eq!(nightly.job.expires_after_secs, Some(3600));
        assert_eq!(
            nightly.misfire,
            deck_engine::MisfirePolicy::RunAll { cap: 3 }
        );
        assert_eq!(nightly.overlap, deck_engine::OverlapPolicy::SkipWhileActive);
        assert_eq!(defs[1].spec, deck_engine::ScheduleSpec::EverySecs(900));
        assert_eq!(defs[1].time_zone, "UTC");
        assert!(
            load_with("", &[], &[])
                .unwrap()
                .settings
                .schedule_definitions()
                .is_none(),
            "no [[schedules]]: nothing declared, the stored schedules are left alone"
        );

        let cases = [
            ("cron = \"* * *\"", "schedules[0].cron"),
            (
                "cron = \"@hourly\"\ntime_zone = \"Mars/Base\"",
                "schedules[0].time_zone",
            ),
            ("every = \"soon\"", "schedules[0].every"),
            ("cron = \"@hourly\"\nevery = \"1h\"", "schedules[0].every"),
            ("", "schedules[0].cron"),
            (
                "cron = \"@hourly\"\nmisfire = \"later\"",
                "schedules[0].misfire",
            ),
            (
                "cron = \"@hourly\"\nmisfire_cap = 3",
                "schedules[0].misfire_cap",
            ),
            (
                "cron = \"@hourly\"\noverlap = \"never\"",
                "schedules[0].overlap",
            ),
            ("cron = \"@hourly\"\nqeue = \"x\"", "qeue"),
        ];
        for (extra, key) in cases {
            let file =
                format!("[[schedules]]\nname = \"s\"\nqueue = \"q\"\njob_type = \"t\"\n{extra}\n");
            let err = load_with(&file, &[], &[]).unwrap_err().to_string();
            assert!(err.contains(key), "{extra:?} should name {key}: {err}");
        }
        let twice = "[[schedules]]\nname = \"s\"\nqueue = \"q\"\njob_type = \"t\"\ncron = \"@hourly\"\n\
                     [[schedules]]\nname = \"s\"\nqueue = \"q\"\njob_type = \"t\"\ncron = \"@daily\"\n";
        let err = load_with(twice, &[], &[]).unwrap_err().to_string();
        assert!(err.contains("schedules[1].name"), "{err}");
    }

    #[test]
    fn queue_settings_are_read_from_the_file_and_their_mistakes_are_named() {
        let file = "[queues.newsletter]\nrate_limit = { starts = 100, per_secs = 60 }\n\
                    max_workers = 4\n[queues.reports]\npaused = true\n";
        let loaded = load_with(file, &[], &[]).unwrap();
        let q = &loaded.settings.queues;
        let patch = q["newsletter"].patch();
        assert_eq!(
            patch.rate_limit,
            Some(Some(deck_engine::RateLimit {
                starts: 100,
                per_secs: 60
            }))
        );
        assert_eq!(patch.max_workers, Some(Some(4)));
        assert_eq!(
            patch.zombie_timeout_secs, None,
            "keys left out change nothing"
        );
        assert_eq!(q["reports"].patch().paused, Some(true));

        let typo = "[queues.newsletter]\nrate_limt = { starts = 1, per_secs = 1 }\n";
        let err = load_with(typo, &[], &[]).unwrap_err().to_string();
        assert!(err.contains("rate_limt"), "{err}");
        let zero = "[queues.newsletter]\nrate_limit = { starts = 0, per_secs = 60 }\n";
        let err = load_with(zero, &[], &[]).unwrap_err().to_string();
        assert!(err.contains("queues.newsletter.rate_limit.starts"), "{err}");
        let long = "[queues.newsletter]\nrate_limit = { starts = 5, per_secs = 90000 }\n";
        let err = load_with(long, &[], &[]).unwrap_err().to_string();
        assert!(err.contains("rate_limit.per_secs"), "{err}");
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
        assert_eq!(s.engine.worker_count, Some(4));
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
            s.engine.rescue.default_zombie_timeout,
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
            ("DECK_TOKEN", "abc"),
            ("DECK_DEMO_WEBHOOK_SECRET", "s"),
        ];
        let loaded = load_with("", &env, &[]).unwrap();
        assert!(
            loaded.warnings.is_empty(),
            "deck reads these itself: {:?}",
            loaded.warnings
        );
    }

    #[test]
    fn unknown_deck_variables_are_ignored_with_a_warning_naming_them() {
        let env = [
            ("DECK_TOKN", "abc"),
            ("DECK_ENGINE__WOKERS", "3"),
            ("DECK_ENGINE__PREFETCH", "7"),
        ];
        let loaded = load_with("", &env, &[]).unwrap();
        assert_eq!(loaded.settings.engine.prefetch, 7, "known keys still apply");
        assert_eq!(loaded.settings.engine.worker_count, None);
        let text = loaded.warnings.join("\n");
        assert_eq!(loaded.warnings.len(), 2, "{text}");
        assert!(text.contains("DECK_TOKN is not a deck setting"), "{text}");
        assert!(
            text.contains("DECK_ENGINE__WOKERS is not a deck setting")
                && text.contains("did you mean DECK_ENGINE__WORKERS?"),
            "{text}"
        );
    }

    #[test]
    fn unknown_keys_in_the_file_and_flags_stay_fatal() {
        let err = load_with(
            "[engine]
wokers = 3
",
            &[],
            &[],
        )
        .unwrap_err();
        assert!(err.to_string().contains("engine.wokers"), "{err}");
        let err = load_with("", &[], &[("engine.wokers", Value::from(3u32))]).unwrap_err();
        assert!(err.to_string().contains("engine.wokers"), "{err}");
    }

    #[test]
    fn a_known_variable_with_a_bad_value_is_still_an_error() {
        let err = load_with("", &[("DECK_ENGINE__PREFETCH", "lots")], &[]).unwrap_err();
        assert!(err.to_string().contains("DECK_ENGINE__PREFETCH"), "{err}");
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
