//! `deck enqueue`: one job from the command line. The request is validated before the
//! database is opened, so a typo never creates a database file or half a job.

use std::path::PathBuf;

use anyhow::Context;
use deck_engine::EnqueueRequest;
use deck_engine::validation::validate_enqueue;

use crate::cli::EnqueueArgs;
use crate::commands::{emit, load_config, open_store, parse_time};

pub async fn run(config: Option<PathBuf>, args: EnqueueArgs) -> anyhow::Result<()> {
    let loaded = load_config(config, |s| args.db.apply(s))?;
    let req = request(&args)?;
    validate_enqueue(&req).context("the job was not enqueued")?;
    let store = open_store(&loaded.settings).await?;
    let outcome = deck_engine::Operations::over_store(store)
        .enqueue(req)
        .await
        .context("the job was not enqueued")?;
    if !outcome.created {
        eprintln!(
            "note: a job already holds this idempotency key (an active one, or a finished one \
             inside its uniqueness window); no new job was written, its id follows"
        );
    }
    emit(&format!("{}\n", outcome.id))?;
    Ok(())
}

pub fn request(args: &EnqueueArgs) -> anyhow::Result<EnqueueRequest> {
    let delay_ms = args
        .delay
        .as_deref()
        .map(|d| {
            humantime::parse_duration(d.trim())
                .map(|d| d.as_millis() as u64)
                .with_context(|| {
                    format!("--delay {d:?} is not a duration\n  help: write it like 30s, 5m or 1h")
                })
        })
        .transpose()?;
    let unique_for_ms = args
        .unique_for
        .as_deref()
        .map(|d| {
            humantime::parse_duration(d.trim())
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .with_context(|| {
                    format!(
                        "--unique-for {d:?} is not a duration\n  help: write it like 10m, 1h or 7d"
                    )
                })
        })
        .transpose()?;
    let scheduled_at = args
        .scheduled_at
        .as_deref()
        .map(|t| parse_time("--scheduled-at", t))
        .transpose()?;
    let expires_at = args
        .expires_at
        .as_deref()
        .map(|t| parse_time("--expires-at", t))
        .transpose()?;
    Ok(EnqueueRequest {
        queue: args.queue.clone(),
        job_type: args.job_type.clone(),
        payload: args.payload.clone(),
        tags: args.tags.clone(),
        priority: args.priority,
        scheduled_at,
        delay_ms,
        idempotency_key: args.idempotency_key.clone(),
        unique_for_ms,
        unique_states: args.unique_states.iter().map(|s| (*s).into()).collect(),
        correlation_id: args.correlation_id.clone(),
        created_by: Some(args.created_by.clone().unwrap_or_else(|| "cli".to_string())),
        expires_at,
        max_attempts: args.max_attempts,
        continuation: None,
        trace_context: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn args(extra: &[&str]) -> EnqueueArgs {
        let mut argv = vec!["deck", "enqueue", "--queue", "q", "--type", "t"];
        argv.extend_from_slice(extra);
        match Cli::parse_from(argv).command {
            Command::Enqueue(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn flags_map_onto_the_request() {
        let req = request(&args(&[
            "--payload",
            "{\"a\":1}",
            "--priority",
            "-5",
            "--delay",
            "2m",
            "--tag",
            "x",
            "--tag",
            "y",
            "--idempotency-key",
            "k",
        ]))
        .unwrap();
        assert_eq!(req.payload, "{\"a\":1}");
        assert_eq!(req.priority, -5);
        assert_eq!(req.delay_ms, Some(120_000));
        assert_eq!(req.tags, ["x", "y"]);
        assert_eq!(req.idempotency_key.as_deref(), Some("k"));
        assert_eq!(req.created_by.as_deref(), Some("cli"));
    }

    #[test]
    fn bad_times_say_how_to_write_them() {
        let err = request(&args(&["--scheduled-at", "tomorrow"])).unwrap_err();
        assert!(
            format!("{err:#}").contains("2026-01-31T09:00:00Z"),
            "{err:#}"
        );
        let err = request(&args(&["--delay", "soon"])).unwrap_err();
        assert!(format!("{err:#}").contains("30s"), "{err:#}");
    }
}
