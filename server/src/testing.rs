//! Hooks for the process tests (`server/tests/`), off unless their environment variable is
//! set. `DECK_TEST_SIDE_EFFECT_LOG=FILE` registers the handler `test.record`: it appends the
//! job id to FILE (one `write` with `O_APPEND`, so lines from several processes never
//! interleave), then sleeps `sleep_ms` from its payload, honouring cancellation. The file is
//! the proof of which jobs ran, and how often.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use deck_engine::{HandlerError, HandlerRegistry};
use serde::Deserialize;

pub const SIDE_EFFECT_LOG_ENV: &str = "DECK_TEST_SIDE_EFFECT_LOG";
pub const RECORD_TYPE: &str = "test.record";

#[derive(Debug, Deserialize)]
struct RecordPayload {
    #[serde(default)]
    sleep_ms: u64,
}

pub fn register_from_env(handlers: &mut HandlerRegistry) -> anyhow::Result<()> {
    let Some(path) = std::env::var_os(SIDE_EFFECT_LOG_ENV).map(PathBuf::from) else {
        return Ok(());
    };
    // Open once up front so a bad path fails the start, not every job.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("{SIDE_EFFECT_LOG_ENV}: cannot open {}", path.display()))?;
    tracing::warn!(event = "testing.side_effect_log", path = %path.display(), "test handler {RECORD_TYPE} is registered");
    handlers.register(RECORD_TYPE, move |ctx, payload: RecordPayload| {
        let path = path.clone();
        async move {
            let line = format!("{}\n", ctx.id());
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .map_err(|e| HandlerError::transient(format!("side-effect log: {e}")))?;
            file.write_all(line.as_bytes())
                .map_err(|e| HandlerError::transient(format!("side-effect log: {e}")))?;
            let cancel = ctx.cancellation();
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(payload.sleep_ms)) => {}
                _ = cancel.cancelled() => return Err(HandlerError::transient("cancelled")),
            }
            Ok(())
        }
    });
    Ok(())
}
