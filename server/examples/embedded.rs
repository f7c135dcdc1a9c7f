//! Embed the engine in your own service: register a typed handler, start the engine on the
//! embedded SQLite store, enqueue a job and wait for its result.
//!
//! Run it with `cargo run -p deck --example embedded`.

use std::time::Duration;

use deck_engine::{
    Engine, EngineConfig, EnqueueRequest, HandlerError, HandlerRegistry, JobContext, StoreOptions,
    WaitOutcome,
};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Resize {
    image: String,
    width: u32,
}

#[derive(Serialize)]
struct Resized {
    url: String,
}

async fn resize(ctx: JobContext, job: Resize) -> Result<Resized, HandlerError> {
    if job.width == 0 {
        // Fatal: straight to the dead-letter queue, no retry.
        return Err(HandlerError::fatal("width must be positive"));
    }
    ctx.report_progress(50, "scaling");
    // A Transient error would be retried with backoff; Throttled waits for retry_after.
    Ok(Resized {
        url: format!("{}@{}w.png", job.image.trim_end_matches(".png"), job.width),
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("deck.db").display());
    let store = deck_engine::open_store(&url, &StoreOptions::default()).await?;

    let mut handlers = HandlerRegistry::new();
    handlers.register("image.resize", resize);

    let engine = Engine::start(store, handlers, EngineConfig::default()).await?;
    let req = EnqueueRequest::new(
        "images",
        "image.resize",
        r#"{"image":"cat.png","width":320}"#,
    );
    let (id, outcome) = engine
        .enqueue_and_wait(req, Duration::from_secs(10))
        .await?;
    match outcome {
        WaitOutcome::Succeeded { job } => println!("{id} -> {}", job.result.unwrap_or_default()),
        other => println!("{id} did not succeed: {other:?}"),
    }
    engine.shutdown().await;
    Ok(())
}
