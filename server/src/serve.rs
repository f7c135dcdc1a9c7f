//! `deck serve`: open the store, start the engine, serve HTTP, and shut down gracefully on
//! Ctrl-C or SIGTERM (stop accepting, let the engine finish or hand back its work). The exit
//! status says whether that worked: 0, or `EXIT_WORK_LEFT` when the store could not take
//! everything back (the engine logs which jobs the rescuer will handle).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use deck_engine::store::open::DatabaseUrl;
use deck_engine::{Engine, HandlerRegistry};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cli::ServeArgs;
use crate::commands::{load_config, open_store};
use crate::state::AppState;

/// After the engine has stopped, open HTTP connections (live-refresh streams, long polls)
/// get this long to finish before the process exits anyway.
const HTTP_DRAIN: Duration = Duration::from_secs(5);

/// Exit status of a shutdown that left work to the rescuer: finished jobs whose outcome the
/// store would not commit, handlers that ignored cancellation, buffered jobs not handed back.
pub const EXIT_WORK_LEFT: u8 = 3;

pub async fn run(
    config: Option<PathBuf>,
    args: ServeArgs,
    traces: crate::traces::Export,
) -> anyhow::Result<ExitCode> {
    let loaded = load_config(config, |s| args.apply(s))?;
    let settings = loaded.settings;
    if let Some(file) = &loaded.file {
        tracing::info!(event = "config.loaded", file = %file.display(), "configuration read from {}", file.display());
    }
    // Loading checked it against the engine's rules; the engine logs its warnings at start.
    let engine_config = settings.engine.clone();

    // Bind before anything starts, so a taken port fails fast with nothing to undo.
    let addr: SocketAddr = settings
        .listen
        .parse()
        .with_context(|| format!("listen address {:?} is not IP:PORT", settings.listen))?;
    settings
        .auth
        .check_serving(addr)
        .map_err(anyhow::Error::msg)?;
    let listener = TcpListener::bind(addr).await.with_context(|| {
        format!(
            "cannot listen on {addr}\n  help: another process (another deck?) may hold the \
             port; stop it or pass --listen 127.0.0.1:<another port>"
        )
    })?;
    let local = listener.local_addr()?;

    let database = DatabaseUrl::parse(&settings.database)?.redacted();
    let store = open_store(&settings).await?;

    let mut handlers = HandlerRegistry::new();
    // Receivers of HTTP handlers report progress to this API.
    let progress = deck_http_handlers::ProgressTokens::default();
    let callback = deck_http_handlers::ProgressCallback {
        tokens: progress.clone(),
        base_url: settings
            .http
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", reachable(local))),
    };
    if settings.demo {
        crate::demo::register(&mut handlers);
        deck_http_handlers::register_with_progress(
            &mut handlers,
            &[crate::demo::webhook::endpoint(local)],
            &crate::demo::webhook::secrets,
            Some(callback.clone()),
        )?;
    }
    crate::testing::register_from_env(&mut handlers)?;
    // Checked when the configuration loaded; warnings were logged then.
    deck_http_handlers::register_with_progress(
        &mut handlers,
        &settings.handlers,
        &|var| std::env::var(var).ok(),
        Some(callback.clone()),
    )?;
    for endpoint in &settings.handlers {
        tracing::info!(
            event = "handlers.http",
            url = %endpoint.url,
            types = ?endpoint.types,
            queues = ?endpoint.queues,
            concurrency = endpoint.concurrency,
            signed = endpoint.secret_env.is_some(),
            "jobs go to an HTTP endpoint"
        );
    }

    let mut builder = Engine::builder(store)
        .handlers(handlers)
        .config(engine_config)
        .declared_by("deck.toml");
    if let Some(schedules) = settings.schedule_definitions() {
        builder = builder.schedules(schedules);
    }
    let (engine, declared) = builder
        .start_with_report()
        .await
        .context("cannot start the engine")?;
    if let Some(d) = declared {
        tracing::info!(
            event = "schedules.declared",
            created = ?d.created,
            updated = ?d.updated,
            unchanged = d.unchanged.len(),
            paused_undeclared = ?d.paused_undeclared,
            "[[schedules]] from the configuration declared"
        );
    }
    tracing::info!(
        event = "server.started",
        instance = engine.instance_id(),
        database = %database,
        listen = %local,
        "The Deck is running on {database}; console at http://{local}/"
    );
    match &traces {
        crate::traces::Export::To(url) => {
            tracing::info!(event = "traces.export", endpoint = %url, "{}", traces.describe());
        }
        _ => tracing::info!(event = "traces.export", "{}", traces.describe()),
    }

    // `[queues.NAME]` from the file: applied through the operations layer, so audited.
    for (name, queue) in &settings.queues {
        engine
            .operations()
            .update_queue("deck.toml", name, queue.patch())
            .await
            .with_context(|| format!("cannot apply [queues.{name}] from the configuration"))?;
    }

    if settings.demo {
        crate::demo::schedules::start(engine.operations()).await;
    } else {
        crate::demo::schedules::pause(engine.operations()).await;
    }

    let shutdown = CancellationToken::new();
    let demo = settings.demo.then(|| {
        tokio::spawn(
            crate::demo::workload::run(engine.clone(), shutdown.child_token())
                .instrument(tracing::info_span!("demo")),
        )
    });

    let limits = crate::connections::ConnectionLimits::from(&settings.http);
    let state = AppState::with_progress(engine.clone(), settings, progress);
    let app = crate::http::router(state);
    let http = crate::http::HttpRuntime::start().context("cannot start the HTTP runtime")?;
    let server = http.serve(listener, app, limits, shutdown.clone());

    wait_for_signal().await;
    tracing::info!(
        event = "server.shutdown",
        "shutting down: no new requests, workers finish or hand back their jobs"
    );
    // A second signal means "now": leave without waiting for the grace period.
    tokio::spawn(async {
        wait_for_signal().await;
        tracing::warn!(event = "server.abort", "second signal: exiting at once");
        std::process::exit(130);
    });

    shutdown.cancel();
    if let Some(demo) = demo {
        let _ = demo.await;
    }
    let report = engine.shutdown().await;
    match tokio::time::timeout(HTTP_DRAIN, server).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(event = "server.http_error", error = %e, "HTTP server task failed")
        }
        Err(_) => tracing::info!(
            event = "server.http_drain_timeout",
            "open HTTP connections closed after {} s",
            HTTP_DRAIN.as_secs()
        ),
    }
    http.stop();
    if report.is_clean() {
        tracing::info!(event = "server.stopped", "stopped");
        return Ok(ExitCode::SUCCESS);
    }
    tracing::error!(
        event = "server.stopped_with_work_left",
        uncommitted = report.uncommitted.len(),
        still_running = report.still_running.len(),
        unreleased = report.unreleased.len(),
        "stopped, leaving the jobs named above to the rescuer; exit status {EXIT_WORK_LEFT}"
    );
    Ok(ExitCode::from(EXIT_WORK_LEFT))
}

/// Ctrl-C or SIGTERM (what `docker stop`, systemd and Kubernetes send).
/// `addr` as another process on this machine reaches it (a server bound to every interface
/// answers on loopback).
fn reachable(addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
    } else {
        addr
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!(event = "server.signal_error", error = %e, "cannot watch SIGTERM; Ctrl-C still works");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
