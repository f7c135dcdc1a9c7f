//! The JSON API under `/api/v1`: enqueue (one or a batch), read jobs with long-polling,
//! list and search jobs, their progress, cancel, resurrect, purge, error groups, queues,
//! recurring schedules, instances, engine settings, the audit log, stats, the worker
//! protocol for external workers — and its OpenAPI document, generated from the handlers themselves so the two
//! cannot drift apart.
//!
//! Errors are always `{"error": {"code", "message", "field"}}` (see `error`). Bad input is
//! rejected before the engine sees it, so nothing is written. Reads need the viewer role,
//! everything that changes state needs an operator, the worker protocol a worker (or an
//! operator) (see `principal`); operator actions on
//! existing jobs, queues and schedules are written to the audit log.
//!
//! It stands on the engine and the web platform (`deck_web`: users, roles, the shared
//! telemetry snapshot) and knows nothing of the console; `deck serve` mounts both.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use deck_engine::Engine;
use deck_engine::validation::MAX_PAYLOAD_BYTES;
use deck_web::SharedTelemetry;
use deck_web::auth::{AUTH_CHALLENGE, AuthConfig};
use deck_web::telemetry::DEFAULT_TICK;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

mod audit;
mod batches;
mod bulk;
mod document;
pub mod dto;
pub mod error;
mod error_groups;
mod extract;
mod instance_list;
mod instances;
mod job_lists;
mod jobs;
mod limits;
pub mod principal;
mod progress;
mod purge;
mod queues;
mod responses;
mod schedules;
mod settings;
mod stats;
#[cfg(test)]
mod tests;
mod traces;
mod wire;
mod workers;

use error::{ApiError, ErrorBody};
use principal::Principal;

/// Where the API is mounted.
pub const PREFIX: &str = "/api/v1";
/// Longest `?wait=` honoured; longer asks are cut to this.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// Body limit for single-job requests: one maximal payload plus room for the envelope.
pub const SINGLE_BODY_LIMIT: usize = MAX_PAYLOAD_BYTES + 256 * 1024;
/// Body limit for batches.
pub const BATCH_BODY_LIMIT: usize = 32 * 1024 * 1024;
/// Body limit for every other request (the worker protocol's small bodies): axum's own
/// default, stated here so the document can say it.
pub const DEFAULT_BODY_LIMIT: usize = 2 * 1024 * 1024;

/// Who sent this `Authorization` header value; `None` = not authenticated.
pub type Authenticator = Arc<dyn Fn(Option<&str>) -> Option<Principal> + Send + Sync>;

#[derive(Clone)]
pub struct ApiState {
    pub engine: Engine,
    pub max_wait: Duration,
    pub authenticate: Authenticator,
    /// Users are configured: the OpenAPI document states the security requirements.
    pub credentials_required: bool,
    /// `[auth] public_openapi`: the document itself is served without credentials.
    pub openapi_public: bool,
    /// The telemetry snapshot `/stats` serves (one read per tick, however many ask).
    pub telemetry: Arc<SharedTelemetry>,
    /// The progress tokens of HTTP-handled attempts in flight (`/jobs/{id}/progress`).
    pub progress: deck_http_handlers::ProgressTokens,
}

impl ApiState {
    /// Callers authenticate through `authenticate`.
    pub fn new(engine: Engine, authenticate: Authenticator) -> Self {
        ApiState {
            telemetry: Arc::new(SharedTelemetry::of_engine(&engine, DEFAULT_TICK)),
            engine,
            max_wait: MAX_WAIT,
            authenticate,
            credentials_required: true,
            openapi_public: false,
            progress: Default::default(),
        }
    }

    /// Serve `telemetry`, a snapshot shared with others (`deck serve` hands over the one its
    /// console reads).
    pub fn with_telemetry(mut self, telemetry: Arc<SharedTelemetry>) -> Self {
        self.telemetry = telemetry;
        self
    }

    /// Authentication off (loopback only): every caller is the anonymous operator.
    pub fn open(engine: Engine) -> Self {
        ApiState {
            credentials_required: false,
            ..Self::new(engine, Arc::new(|_| Some(Principal::anonymous())))
        }
    }

    /// Callers authenticate as the users of `auth` (`[auth]`, the console's users too);
    /// with none configured, `deck serve` only starts on loopback and every caller is the
    /// local operator.
    pub fn for_users(engine: Engine, auth: &AuthConfig) -> Self {
        ApiState {
            credentials_required: !auth.is_open(),
            openapi_public: auth.public_openapi,
            ..Self::new(engine, principal::authenticator(auth))
        }
    }
}

/// The API router over an explicit state (tests, benchmarks, embedding).
pub fn api_router(state: ApiState) -> Router {
    let (router, _) = routes().split_for_parts();
    router
        .route_layer(middleware::from_fn(crate::traces::write_request_span))
        .route(
            &format!("{PREFIX}/{{*rest}}"),
            axum::routing::any(no_such_route),
        )
        .layer(middleware::map_response(json_method_not_allowed))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "The Deck JSON API",
        description = "Enqueue jobs, await their results, and operate queues. Errors are \
                       `{\"error\": {\"code\", \"message\", \"field\"}}` with a stable code. \
                       This document describes the server that serves it: with users \
                       configured, operations state their security (bearer token or basic \
                       auth); without users (loopback only) no request needs credentials.",
    ),
    tags(
        (name = "jobs", description = "Enqueue, read (with long-polling), list and search, \
                                        progress, cancel, resurrect, purge; error groups"),
        (name = "queues", description = "List, pause, resume, change settings"),
        (name = "schedules", description = "Recurring jobs: cron expressions in an IANA time \
                                             zone or fixed intervals; list, read the coming \
                                             occurrences, create, replace, pause, resume, run \
                                             now, delete, run history"),
        (name = "batches", description = "Many jobs enqueued as one batch, with callbacks \
                                           (on_success, on_complete, on_death) enqueued \
                                           exactly once; list and read with members"),
        (name = "stats", description = "Summary numbers"),
        (name = "instances", description = "List, quiet and resume engine instances"),
        (name = "settings", description = "Engine settings: read, replace, change some"),
        (name = "audit", description = "The audit log of operator actions"),
        (name = "bulk", description = "Actions on every job a filter matches, run in the \
                                        background in short steps and audited once: cancel, \
                                        run now, priority, purge, resurrect; their progress"),
        (name = "workers", description = "The worker protocol: external workers in any language \
                                           claim jobs, heartbeat them and report outcomes"),
        (name = "meta", description = "This document"),
    ),
    components(schemas(
        limits::Name,
        limits::Tag,
        limits::AnyJson,
        limits::CronExpr,
        limits::IanaTimeZone,
        limits::ZoneQuery,
        limits::ScheduleName,
        limits::Description,
        dto::job_lists::SourceName,
        dto::job_lists::HotStatusName,
        dto::job_lists::ReasonName,
        dto::job_lists::SortName,
        dto::job_lists::DirectionName,
        dto::job_lists::FingerprintText,
        dto::job_lists::PageCursor,
        dto::job_lists::ListTime,
    )),
)]
struct ApiDoc;

fn routes() -> OpenApiRouter<ApiState> {
    let single = OpenApiRouter::new()
        .routes(routes!(jobs::enqueue))
        .routes(routes!(jobs::resurrect))
        .routes(routes!(progress::report_progress, progress::read_progress))
        .routes(routes!(queues::update_queue))
        .routes(routes!(workers::complete))
        // Schedule bodies carry a job template's payload; the rest share the paths.
        .routes(routes!(
            schedules::list_schedules,
            schedules::create_schedule
        ))
        .routes(routes!(
            schedules::get_schedule,
            schedules::replace_schedule,
            schedules::delete_schedule
        ))
        .routes(routes!(schedules::pause))
        .routes(routes!(schedules::resume))
        .routes(routes!(schedules::run_now))
        .routes(routes!(schedules::list_runs))
        .layer(DefaultBodyLimit::max(SINGLE_BODY_LIMIT));
    let batch = OpenApiRouter::new()
        .routes(routes!(jobs::enqueue_batch))
        .routes(routes!(batches::create_batch, batches::list_batches))
        .layer(DefaultBodyLimit::max(BATCH_BODY_LIMIT));
    let rest = OpenApiRouter::new()
        .routes(routes!(jobs::get_job))
        .routes(routes!(purge::purge))
        .routes(routes!(job_lists::list_jobs))
        .routes(routes!(error_groups::list_error_groups))
        .routes(routes!(instance_list::list_instances))
        .routes(routes!(audit::list_audit))
        .routes(routes!(batches::get_batch))
        .routes(routes!(jobs::cancel))
        .routes(routes!(bulk::run_job_now))
        .routes(routes!(bulk::cancel))
        .routes(routes!(bulk::run_now))
        .routes(routes!(bulk::priority))
        .routes(routes!(bulk::purge))
        .routes(routes!(bulk::resurrect))
        .routes(routes!(bulk::get_run))
        .routes(routes!(queues::list_queues))
        .routes(routes!(queues::pause))
        .routes(routes!(queues::resume))
        .routes(routes!(instances::quiet))
        .routes(routes!(instances::resume))
        .routes(routes!(stats::stats))
        // Settings bodies are a few numbers: the small-body limit their document states.
        .routes(routes!(
            settings::get_settings,
            settings::replace_settings,
            settings::patch_settings
        ))
        .routes(routes!(workers::claim))
        .routes(routes!(workers::heartbeat))
        .routes(routes!(workers::progress))
        .routes(routes!(workers::fail))
        .routes(routes!(workers::release))
        .routes(routes!(openapi_json))
        .layer(DefaultBodyLimit::max(DEFAULT_BODY_LIMIT));
    OpenApiRouter::with_openapi(ApiDoc::openapi()).nest(PREFIX, single.merge(batch).merge(rest))
}

/// This document (OpenAPI 3.1), generated from the handlers for this server's configuration.
#[utoipa::path(
    get, path = "/openapi.json", tag = "meta",
    responses(
        (status = 200, description = "The OpenAPI document", content_type = "application/json"),
        (status = 401, description = "No or bad credentials", body = ErrorBody),
    )
)]
async fn openapi_json(
    State(state): State<ApiState>,
    caller: Result<principal::Viewer, ApiError>,
) -> Response {
    // With users, the document maps the API for whoever may use it (any role), unless
    // `[auth] public_openapi` opens it; without users every caller is the local operator.
    if let (false, Err(refused)) = (state.openapi_public, caller) {
        return refused.into_response();
    }
    (
        [(header::CONTENT_TYPE, "application/json")],
        document::served(state.credentials_required, state.openapi_public),
    )
        .into_response()
}

async fn no_such_route(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(
        "no_such_route",
        format!(
            "{method} {} is not an API route; see {PREFIX}/openapi.json",
            uri.path()
        ),
    )
}

/// axum answers a known path with the wrong method by an empty 405; give it the JSON shape.
async fn json_method_not_allowed(response: Response) -> Response {
    if response.status() == StatusCode::METHOD_NOT_ALLOWED
        && !response.headers().contains_key(header::CONTENT_TYPE)
    {
        let allow = response.headers().get(header::ALLOW).cloned();
        let mut fixed = ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!(
                "this route does not take that method; allowed: {}",
                allow
                    .as_ref()
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("see the OpenAPI document")
            ),
        )
        .into_response();
        if let Some(allow) = allow {
            fixed.headers_mut().insert(header::ALLOW, allow);
        }
        return fixed;
    }
    response
}

/// Runs before every API handler: refuses state changes sent by another site's page (a
/// browser attaches cached basic credentials or cookies to those), and works out who the
/// caller is from the `Authorization` header.
async fn guard(State(state): State<ApiState>, mut req: Request, next: Next) -> Response {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe && is_cross_site(&req) {
        return ApiError::forbidden(
            "cross-site request refused: the API does not accept state changes from another \
             site's page; call it from a server or script with credentials",
        )
        .into_response();
    }
    // A principal set by an outer layer (an embedding application's own auth) stands.
    if req.extensions().get::<Principal>().is_none() {
        let header = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match (state.authenticate)(header) {
            Some(principal) => {
                req.extensions_mut().insert(principal);
            }
            None if header.is_some() => {
                return unauthorized(ApiError::unauthorized(
                    "the credentials were not accepted; check the token or user name and password",
                ));
            }
            // No credentials: endpoints that need a role answer 401 through their extractor.
            None => {}
        }
    }
    let response = next.run(req).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        let mut response = response;
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            axum::http::HeaderValue::from_static(AUTH_CHALLENGE),
        );
        return response;
    }
    response
}

fn unauthorized(e: ApiError) -> Response {
    let mut response = e.into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        axum::http::HeaderValue::from_static(AUTH_CHALLENGE),
    );
    response
}

fn is_cross_site(req: &Request) -> bool {
    let headers = req.headers();
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("cross-site"))
    {
        return true;
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    host.is_none_or(|h| !h.eq_ignore_ascii_case(origin_host))
}
