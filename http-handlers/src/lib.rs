//! HTTP handlers: jobs run by code in any language behind an HTTP endpoint.
//!
//! Each `[[handlers]]` entry maps job types (`email.send`, `email.*`, `*`) or whole queues to
//! a URL. A job is POSTed there as a JSON [`Envelope`], signed (see [`signature`]); the answer
//! decides the outcome (see the table in `outcome.rs`, repeated in the README). Requests to
//! one endpoint are limited to `concurrency` at once over pooled keep-alive connections (the
//! engine starts no more of its jobs than that: the others wait unstarted), and
//! the jobs of one endpoint share one circuit breaker, named by its URL: an endpoint that is
//! down defers its jobs (no attempt spent) instead of burning their retries. A cancel or an
//! execution timeout aborts the request.
//!
//! ```no_run
//! use deck_http_handlers::{HttpHandlerConfig, register};
//! let mut handlers = deck_engine::HandlerRegistry::new();
//! let endpoints = [HttpHandlerConfig::new("http://mailer.internal:8080/jobs", &["email.*"])];
//! let warnings = register(&mut handlers, &endpoints, &|var| std::env::var(var).ok())?;
//! # Ok::<(), deck_http_handlers::HandlersError>(())
//! ```

mod config;
mod endpoint;
mod outcome;
mod progress;
pub mod signature;

use deck_engine::{HandlerRegistry, Route};

pub use config::{
    DEFAULT_CONCURRENCY, HandlerProblem, HandlersReport, HttpHandlerConfig, MAX_CONCURRENCY, check,
};
pub use endpoint::{ATTEMPT_HEADER, Envelope, JOB_ID_HEADER, ProgressCallback, ProgressLink};
pub use progress::{PROGRESS_TOKEN_HEADER, ProgressRefused, ProgressTokens};

/// `[[handlers]]` entries that cannot run, each with its fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid handlers:\n  - {}", list(.problems))]
pub struct HandlersError {
    pub problems: Vec<HandlerProblem>,
}

fn list(problems: &[HandlerProblem]) -> String {
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    lines.join("\n  - ")
}

/// Route every job the entries name to its endpoint. Returns the warnings (unsigned
/// endpoints, short secrets); `env` reads the secrets' variables.
pub fn register(
    registry: &mut HandlerRegistry,
    configs: &[HttpHandlerConfig],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, HandlersError> {
    register_with_progress(registry, configs, env, None)
}

/// [`register`], and each envelope carries a progress callback into `progress` (the API
/// serving `POST /api/v1/jobs/{id}/progress` holds the same [`ProgressTokens`]).
pub fn register_with_progress(
    registry: &mut HandlerRegistry,
    configs: &[HttpHandlerConfig],
    env: &dyn Fn(&str) -> Option<String>,
    progress: Option<ProgressCallback>,
) -> Result<Vec<String>, HandlersError> {
    let report = check(configs, env);
    if !report.problems.is_empty() {
        return Err(HandlersError {
            problems: report.problems,
        });
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("deck/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| HandlersError {
            problems: vec![HandlerProblem {
                key: "handlers".into(),
                problem: format!("the HTTP client cannot start: {e}"),
                help: "check the machine's TLS setup".into(),
            }],
        })?;
    for c in configs {
        let secret = c
            .secret_env
            .as_deref()
            .and_then(env)
            .map(String::into_bytes);
        let endpoint = endpoint::Endpoint::new(c, client.clone(), secret, progress.clone());
        let routes = c
            .types
            .iter()
            .map(|t| Route::Types(t.clone()))
            .chain(c.queues.iter().map(|q| Route::Queue(q.clone())));
        // The engine starts at most `concurrency` of the endpoint's jobs at once: the rest
        // wait unstarted (no attempt spent, never a zombie after a crash).
        registry.limit(endpoint.url().to_string(), c.concurrency);
        for route in routes {
            let endpoint = endpoint.clone();
            registry.route_to(route, endpoint.url().to_string(), move |ctx| {
                let endpoint = endpoint.clone();
                async move { endpoint.run(ctx).await }
            });
        }
    }
    Ok(report.warnings)
}
