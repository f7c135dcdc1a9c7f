//! The operator's one-shot tools: `deck migrate`, `deck stats`, `deck enqueue`.

pub mod enqueue;
pub mod migrate;
pub mod stats;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use deck_engine::Store;
use deck_engine::store::open::DatabaseUrl;

use crate::config::{self, ConfigSources, Loaded, Settings};

/// Load the configuration with the command's flags on top, logging its warnings.
pub fn load_config(
    file: Option<PathBuf>,
    flags: impl FnOnce(&mut ConfigSources),
) -> anyhow::Result<Loaded> {
    let mut sources = ConfigSources {
        file,
        ..Default::default()
    };
    flags(&mut sources);
    let loaded = config::load(&sources)?;
    for warning in &loaded.warnings {
        tracing::warn!(event = "config.warning", "{warning}");
    }
    Ok(loaded)
}

/// Open the configured database. Store errors already say what failed and how to fix it.
pub async fn open_store(settings: &Settings) -> anyhow::Result<Arc<dyn Store>> {
    let store = deck_engine::open_store(&settings.database, &settings.store).await?;
    Ok(store)
}

/// Open the configured database for a command that only reads it. A SQLite file that does not
/// exist is refused, not created: a mistyped path must not leave an empty database behind and
/// answer with zeros.
pub async fn open_existing_store(settings: &Settings) -> anyhow::Result<Arc<dyn Store>> {
    if let DatabaseUrl::Sqlite { path } = DatabaseUrl::parse(&settings.database)?
        && !is_in_memory(&path)
        && !Path::new(&path).exists()
    {
        anyhow::bail!(
            "no database at {path:?}: the SQLite file does not exist\n  help: check the \
             path in --database, DECK_DATABASE or deck.toml; to create one, run \
             deck migrate --database sqlite://{path} (or start deck serve on it)"
        );
    }
    open_store(settings).await
}

fn is_in_memory(path: &str) -> bool {
    path == ":memory:" || path.starts_with("file::memory:")
}

/// Write a command's answer to stdout. A closed pipe (`deck stats | head`) is not an error.
pub fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("cannot write to stdout"))
        }
        _ => Ok(()),
    }
}

/// Parse an RFC 3339 time given on the command line.
pub fn parse_time(flag: &str, value: &str) -> anyhow::Result<deck_engine::Timestamp> {
    chrono::DateTime::parse_from_rfc3339(value.trim())
        .map(|t| t.with_timezone(&chrono::Utc))
        .with_context(|| {
            format!(
                "{flag} {value:?} is not an RFC 3339 time\n  help: write it like \
                 2026-01-31T09:00:00Z or 2026-01-31T10:00:00+01:00"
            )
        })
}
