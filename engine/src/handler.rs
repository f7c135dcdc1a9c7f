//! Handlers: user code registered by job type key, with typed (serde) payloads; raw handlers
//! routed by type pattern (`email.*`) or by queue (how HTTP handlers attach); an optional
//! raw fallback for every other type; and middleware around all of them.
//!
//! ```no_run
//! use deck_engine::{HandlerError, HandlerRegistry};
//! #[derive(serde::Deserialize)]
//! struct Email { to: String }
//! let mut handlers = HandlerRegistry::new();
//! handlers.register("email.send", |ctx, email: Email| async move {
//!     if email.to.is_empty() {
//!         return Err(HandlerError::fatal("no recipient"));
//!     }
//!     ctx.report_progress(50, "sending");
//!     Ok(serde_json::json!({ "sent_to": email.to }))
//! });
//! ```

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::events::{EngineEvent, EventKind};
use crate::model::{Job, JobId};
use crate::running::{Progress, RunningJob};
use crate::validation::normalize_payload;

/// The `kind` of a throttled attempt's error, in-process or from an external worker: the
/// retry decision tells throttled runs (which spend no attempt) from the others by it.
pub const THROTTLED_KIND: &str = "throttled";

/// How a handler failed. The variant decides what happens next, never the message text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// Worth retrying (a timeout, a 503, a lock): retried with backoff until attempts run out.
    #[error("{0}")]
    Transient(String),
    /// Can never succeed (bad payload, missing record): straight to the dead-letter queue.
    #[error("{0}")]
    Fatal(String),
    /// The downstream asked us to slow down: retried no earlier than `retry_after`, without
    /// spending one of the job's attempts (bounded by `runtime::retry::MAX_THROTTLES` and
    /// the retry lifetime).
    #[error("{message} (retry after {retry_after:?})")]
    Throttled {
        retry_after: Duration,
        message: String,
    },
}

impl HandlerError {
    pub fn transient(message: impl fmt::Display) -> Self {
        HandlerError::Transient(message.to_string())
    }

    pub fn fatal(message: impl fmt::Display) -> Self {
        HandlerError::Fatal(message.to_string())
    }

    pub fn throttled(retry_after: Duration, message: impl fmt::Display) -> Self {
        HandlerError::Throttled {
            retry_after,
            message: message.to_string(),
        }
    }

    /// Stable short name, stored as the attempt error's `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            HandlerError::Transient(_) => "transient",
            HandlerError::Fatal(_) => "fatal",
            HandlerError::Throttled { .. } => THROTTLED_KIND,
        }
    }
}

/// What a handler (or middleware) returns: the result as JSON text (`None` = no result).
pub type HandlerOutcome = Result<Option<String>, HandlerError>;

/// Everything a handler may know about the job it runs. Cheap to clone.
#[derive(Clone)]
pub struct JobContext {
    pub(crate) inner: Arc<RunningJob>,
}

impl fmt::Debug for JobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("id", &self.id())
            .field("queue", &self.queue())
            .field("job_type", &self.job_type())
            .field("attempt", &self.attempt())
            .finish()
    }
}

impl JobContext {
    pub(crate) fn new(inner: Arc<RunningJob>) -> Self {
        JobContext { inner }
    }

    pub fn id(&self) -> JobId {
        self.inner.job.id
    }

    pub fn queue(&self) -> &str {
        &self.inner.job.queue
    }

    pub fn job_type(&self) -> &str {
        &self.inner.job.job_type
    }

    /// This run's number, 1-based.
    pub fn attempt(&self) -> u32 {
        self.inner.job.attempt
    }

    /// The payload as JSON text (`null` when the job was enqueued without one).
    pub fn payload(&self) -> &str {
        normalize_payload(&self.inner.job.payload)
    }

    /// The whole job row as claimed (tags, correlation id, earlier errors, ...).
    pub fn job(&self) -> &Job {
        &self.inner.job
    }

    /// Fires on operator cancel, execution timeout, shutdown after the grace period, or when
    /// the job was taken from this worker. The handler's future is dropped at that point
    /// anyway; long synchronous sections should check `is_cancelled()`.
    pub fn cancellation(&self) -> CancellationToken {
        self.inner.token.clone()
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.token.is_cancelled()
    }

    /// Runs this job gets in all (its own `max_attempts`, else the retry setting when this
    /// attempt started); `attempt() == max_attempts()` is the last one.
    pub fn max_attempts(&self) -> u32 {
        self.inner.max_attempts
    }

    /// When this attempt's execution timeout fires (its token is cancelled then).
    pub fn deadline(&self) -> chrono::DateTime<Utc> {
        let left = self
            .inner
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        chrono::Duration::from_std(left)
            .ok()
            .and_then(|left| Utc::now().checked_add_signed(left))
            .unwrap_or(chrono::DateTime::<Utc>::MAX_UTC)
    }

    /// Report progress; shown in `Engine::snapshot()` and sent as an event.
    pub fn report_progress(&self, percent: u8, message: impl Into<String>) {
        let progress = Progress {
            percent: percent.min(100),
            message: message.into(),
            at: Utc::now(),
        };
        let job = &self.inner.job;
        self.inner.events.send_with(|| {
            EngineEvent::new(
                EventKind::Progress,
                format!("{}% {}", progress.percent, progress.message),
            )
            .job(job.id, &job.queue, &job.job_type)
        });
        *self
            .inner
            .progress
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(progress);
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type ErasedHandler = Arc<dyn Fn(JobContext) -> BoxFuture<HandlerOutcome> + Send + Sync>;

/// Code that runs around every handler (logging, metrics, tracing, auth context, ...).
/// Call `next.run(ctx).await` to run the rest of the chain, or return without calling it
/// to short-circuit.
#[async_trait]
pub trait Middleware: Send + Sync + 'static {
    async fn call(&self, ctx: JobContext, next: Next<'_>) -> HandlerOutcome;
}

/// The rest of the middleware chain, ending in the handler.
pub struct Next<'a> {
    middleware: &'a [Arc<dyn Middleware>],
    handler: &'a ErasedHandler,
}

impl Next<'_> {
    pub async fn run(self, ctx: JobContext) -> HandlerOutcome {
        match self.middleware.split_first() {
            Some((first, rest)) => {
                first
                    .call(
                        ctx,
                        Next {
                            middleware: rest,
                            handler: self.handler,
                        },
                    )
                    .await
            }
            None => (self.handler)(ctx).await,
        }
    }
}

/// Which jobs a routed handler takes (see [`HandlerRegistry::route`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Route {
    /// A type key (`email.send`), every key under a prefix (`email.*`: `email.send`,
    /// `email.digest.weekly`), or every type (`*`).
    Types(String),
    /// Every job of one queue.
    Queue(String),
}

impl Route {
    fn matches(&self, job_type: &str, queue: &str) -> bool {
        match self {
            Route::Queue(q) => q == queue,
            Route::Types(pattern) => match pattern.strip_suffix('*') {
                Some(prefix) => job_type.starts_with(prefix),
                None => pattern == job_type,
            },
        }
    }

    /// More specific routes win: an exact type, then longer prefixes, then a queue.
    fn specificity(&self) -> (u8, usize) {
        match self {
            Route::Types(p) if !p.ends_with('*') => (3, p.len()),
            Route::Types(p) => (2, p.len()),
            Route::Queue(_) => (1, 0),
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Types(p) => write!(f, "type {p}"),
            Route::Queue(q) => write!(f, "queue {q}"),
        }
    }
}

/// Handlers by type key, routed handlers, the fallback, and the middleware chain. Built
/// before the engine starts; `Engine::start` rejects duplicate keys and routes.
#[derive(Default, Clone)]
pub struct HandlerRegistry {
    handlers: HashMap<String, ErasedHandler>,
    /// Most specific first, with the downstream whose circuit breaker they share.
    routes: Vec<(Route, Option<String>, ErasedHandler)>,
    fallback: Option<ErasedHandler>,
    middleware: Vec<Arc<dyn Middleware>>,
    duplicates: Vec<String>,
    /// How many jobs may run at once per downstream (or per job type), declared with
    /// [`limit`](Self::limit).
    limits: HashMap<String, u32>,
}

impl fmt::Debug for HandlerRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerRegistry")
            .field("types", &self.type_keys())
            .field("fallback", &self.fallback.is_some())
            .field("middleware", &self.middleware.len())
            .finish()
    }
}

impl HandlerRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Register a handler for one type key. The payload is deserialised into `P` (a payload
    /// that does not fit is a fatal error naming the type and the serde message); the
    /// result `R` is serialised to JSON and stored with the archived job.
    pub fn register<P, R, F, Fut>(&mut self, type_key: impl Into<String>, handler: F) -> &mut Self
    where
        P: DeserializeOwned + Send + 'static,
        R: Serialize + Send + 'static,
        F: Fn(JobContext, P) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, HandlerError>> + Send + 'static,
    {
        let key: String = type_key.into();
        let name = key.clone();
        let erased: ErasedHandler =
            Arc::new(
                move |ctx: JobContext| match serde_json::from_str::<P>(ctx.payload()) {
                    Ok(payload) => {
                        let fut = handler(ctx, payload);
                        Box::pin(async move { to_json_text(fut.await?) }) as BoxFuture<_>
                    }
                    Err(e) => {
                        let err = HandlerError::Fatal(format!(
                            "payload does not fit handler {name:?}: {e} \
                         (fix the payload and resurrect the job)"
                        ));
                        Box::pin(std::future::ready(Err(err)))
                    }
                },
            );
        self.insert(key, erased);
        self
    }

    /// Register a handler that gets the raw payload (`ctx.payload()`) for one type key.
    pub fn register_raw<F, Fut>(&mut self, type_key: impl Into<String>, handler: F) -> &mut Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<serde_json::Value, HandlerError>> + Send + 'static,
    {
        let erased = erase_raw(handler);
        self.insert(type_key.into(), erased);
        self
    }

    /// A raw handler for every job `route` matches that has no handler of its own type key.
    /// When several routes match, the most specific wins: an exact type, then the longest
    /// prefix, then a queue.
    pub fn route<F, Fut>(&mut self, route: Route, handler: F) -> &mut Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerOutcome> + Send + 'static,
    {
        self.add_route(route, None, handler)
    }

    /// [`route`](Self::route) to a named downstream (an HTTP endpoint, say): every job it
    /// takes shares the downstream's one circuit breaker instead of one per job type, so an
    /// endpoint that is down opens one circuit for all its types.
    pub fn route_to<F, Fut>(
        &mut self,
        route: Route,
        downstream: impl Into<String>,
        handler: F,
    ) -> &mut Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerOutcome> + Send + 'static,
    {
        self.add_route(route, Some(downstream.into()), handler)
    }

    fn add_route<F, Fut>(
        &mut self,
        route: Route,
        downstream: Option<String>,
        handler: F,
    ) -> &mut Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerOutcome> + Send + 'static,
    {
        if self.routes.iter().any(|(r, _, _)| *r == route) {
            self.duplicates.push(route.to_string());
        }
        let erased: ErasedHandler =
            Arc::new(move |ctx: JobContext| Box::pin(handler(ctx)) as BoxFuture<_>);
        let at = self
            .routes
            .iter()
            .position(|(r, _, _)| r.specificity() < route.specificity())
            .unwrap_or(self.routes.len());
        self.routes.insert(at, (route, downstream, erased));
        self
    }

    /// The routes, most specific first.
    pub fn routes(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter().map(|(r, _, _)| r)
    }

    fn route_for(
        &self,
        job_type: &str,
        queue: &str,
    ) -> Option<&(Route, Option<String>, ErasedHandler)> {
        if self.routes.is_empty() || self.handlers.contains_key(job_type) {
            return None;
        }
        self.routes
            .iter()
            .find(|(r, _, _)| r.matches(job_type, queue))
    }

    /// Whose circuit breaker a job's outcome counts for: its routed downstream, else its
    /// job type.
    pub(crate) fn breaker_key<'a>(&'a self, job: &'a Job) -> &'a str {
        match self.route_for(&job.job_type, &job.queue) {
            Some((_, Some(downstream), _)) => downstream,
            _ => &job.job_type,
        }
    }

    /// Let at most `max_running` jobs of one downstream (a name given to
    /// [`route_to`](Self::route_to)) or of one job type run at once in this instance. The
    /// runtime takes a place before it starts a job (marks it processing and counts its
    /// attempt): the others stay buffered, unstarted, while jobs of other handlers start
    /// past them, and a crash returns them to pending without calling them zombies.
    /// Declared twice, the smaller limit holds; 0 counts as 1.
    pub fn limit(&mut self, key: impl Into<String>, max_running: u32) -> &mut Self {
        let max_running = max_running.max(1);
        self.limits
            .entry(key.into())
            .and_modify(|n| *n = (*n).min(max_running))
            .or_insert(max_running);
        self
    }

    /// The limits declared with [`limit`](Self::limit), by downstream or job type.
    pub fn limits(&self) -> impl Iterator<Item = (&str, u32)> {
        self.limits.iter().map(|(k, n)| (k.as_str(), *n))
    }

    /// Whose limit a job counts against: the same key as its circuit breaker.
    pub(crate) fn limit_key<'a>(&'a self, job: &'a Job) -> &'a str {
        self.breaker_key(job)
    }

    /// One raw handler for every type key that has no handler of its own.
    pub fn fallback<F, Fut>(&mut self, handler: F) -> &mut Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<serde_json::Value, HandlerError>> + Send + 'static,
    {
        self.fallback = Some(erase_raw(handler));
        self
    }

    /// Add middleware; the first added is the outermost.
    pub fn middleware(&mut self, middleware: impl Middleware) -> &mut Self {
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// Registered type keys, sorted.
    pub fn type_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.handlers.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// The job types this registry can run, as a claim's type filter: `None` when a
    /// fallback, a prefix route or a queue route may take any type. An engine claims only
    /// these, so jobs of other types wait for a worker that runs them (an external one).
    pub fn claimable_types(&self) -> Option<Vec<String>> {
        if self.fallback.is_some() {
            return None;
        }
        let mut types = self.type_keys();
        for (route, _, _) in &self.routes {
            match route {
                Route::Types(t) if !t.ends_with('*') => types.push(t.clone()),
                _ => return None,
            }
        }
        types.sort();
        types.dedup();
        Some(types)
    }

    pub fn has_fallback(&self) -> bool {
        self.fallback.is_some()
    }

    /// Keys (and routes) registered more than once (a programming error reported by
    /// `Engine::start`).
    pub fn duplicate_keys(&self) -> &[String] {
        &self.duplicates
    }

    fn insert(&mut self, key: String, handler: ErasedHandler) {
        if self.handlers.insert(key.clone(), handler).is_some() {
            self.duplicates.push(key);
        }
    }

    /// Run the job through the middleware chain and its handler.
    pub(crate) async fn dispatch(&self, ctx: JobContext) -> HandlerOutcome {
        let routed = || {
            self.route_for(ctx.job_type(), ctx.queue())
                .map(|(_, _, h)| h)
        };
        let handler = match self
            .handlers
            .get(ctx.job_type())
            .or_else(routed)
            .or(self.fallback.as_ref())
        {
            Some(h) => h,
            None => {
                return Err(HandlerError::Fatal(format!(
                    "no handler registered for type {:?} (registered: {})",
                    ctx.job_type(),
                    self.registered_list()
                )));
            }
        };
        if self.middleware.is_empty() {
            return handler(ctx).await;
        }
        Next {
            middleware: &self.middleware,
            handler,
        }
        .run(ctx)
        .await
    }

    fn registered_list(&self) -> String {
        let mut keys = self.type_keys();
        keys.extend(self.routes().map(ToString::to_string));
        if keys.is_empty() {
            "none".to_string()
        } else {
            keys.join(", ")
        }
    }
}

fn erase_raw<F, Fut>(handler: F) -> ErasedHandler
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<serde_json::Value, HandlerError>> + Send + 'static,
{
    Arc::new(move |ctx: JobContext| {
        let fut = handler(ctx);
        Box::pin(async move { to_json_text(fut.await?) }) as BoxFuture<_>
    })
}

/// Serialise a handler's result; `null` (and `()`) store no result.
fn to_json_text<R: Serialize>(result: R) -> HandlerOutcome {
    match serde_json::to_string(&result) {
        Ok(text) if text == "null" => Ok(None),
        Ok(text) => Ok(Some(text)),
        Err(e) => Err(HandlerError::Fatal(format!(
            "the handler's result cannot be serialised to JSON: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_match_a_type_a_prefix_everything_or_a_queue() {
        let exact = Route::Types("email.send".into());
        let prefix = Route::Types("email.*".into());
        let all = Route::Types("*".into());
        let queue = Route::Queue("mail".into());
        assert!(exact.matches("email.send", "q"));
        assert!(!exact.matches("email.sender", "q"));
        assert!(prefix.matches("email.digest.weekly", "q"));
        assert!(!prefix.matches("emails", "q"));
        assert!(all.matches("anything", "q"));
        assert!(queue.matches("x", "mail") && !queue.matches("x", "other"));
    }

    #[test]
    fn the_most_specific_route_comes_first_and_repeats_are_reported() {
        let mut r = HandlerRegistry::new();
        let ok = |_ctx: JobContext| async { Ok(None) };
        r.route(Route::Queue("mail".into()), ok)
            .route(Route::Types("*".into()), ok)
            .route(Route::Types("email.*".into()), ok)
            .route(Route::Types("email.send".into()), ok)
            .route(Route::Types("email.digest.*".into()), ok)
            .route(Route::Queue("mail".into()), ok);
        let order: Vec<String> = r.routes().map(ToString::to_string).collect();
        assert_eq!(
            order,
            [
                "type email.send",
                "type email.digest.*",
                "type email.*",
                "type *",
                "queue mail",
                "queue mail"
            ]
        );
        assert_eq!(r.duplicate_keys(), ["queue mail"]);
    }

    #[test]
    fn an_engine_claims_only_the_types_it_can_run() {
        let ok = |_ctx: JobContext| async { Ok(None) };
        assert_eq!(HandlerRegistry::new().claimable_types(), Some(vec![]));
        let mut exact = HandlerRegistry::new();
        let raw = |_ctx: JobContext| async { Ok(serde_json::Value::Null) };
        exact
            .register_raw("b.two", raw)
            .register_raw("a.one", raw)
            .route(Route::Types("c.three".into()), ok);
        assert_eq!(
            exact.claimable_types(),
            Some(vec!["a.one".into(), "b.two".into(), "c.three".into()])
        );
        // Anything that may take an unnamed type claims every type.
        for route in [Route::Types("email.*".into()), Route::Queue("mail".into())] {
            let mut open = exact.clone();
            open.route(route, ok);
            assert_eq!(open.claimable_types(), None);
        }
        let mut fallback = exact.clone();
        fallback.fallback(|_ctx| async { Ok(serde_json::Value::Null) });
        assert_eq!(fallback.claimable_types(), None);
    }
}
