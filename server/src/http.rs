//! The HTTP surface of `deck serve`: one router assembled from the parts' routers, and the
//! runtime it is served on. Each part mounts itself with one line here.

use axum::Router;
use deck_api::ApiState;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::connections::ConnectionLimits;

use crate::state::AppState;

#[cfg(test)]
mod doors;

pub fn router(state: AppState) -> Router {
    let routes = Router::new()
        .merge(crate::health::router(state.clone()))
        .merge(crate::metrics::router(state.clone()))
        .merge(api(&state))
        .merge(demo_routes(&state))
        .merge(console(&state));
    crate::request_limits::apply(routes, &state.settings.http)
        .layer(axum::middleware::from_fn_with_state(
            deck_web::auth::ops::OpsAccess::new(&state.settings.auth),
            deck_web::auth::ops::guard,
        ))
        // Last, so outermost: every response, whichever layer made it, carries the headers.
        .layer(deck_web::security_headers::layer())
}

/// The JSON API, paths already under `/api/v1`: the console's users, this process's
/// progress tokens, and the telemetry snapshot the console reads too.
fn api(state: &AppState) -> Router {
    deck_api::api_router(ApiState {
        progress: state.progress.clone(),
        ..ApiState::for_users(state.engine.clone(), &state.settings.auth)
            .with_telemetry(state.telemetry.clone())
    })
}

/// The console (pages, actions, live stream, assets) over this process's engine, sharing
/// the state's telemetry snapshot with the API and the ops endpoints.
fn console(state: &AppState) -> Router {
    deck_app::console_router(state.console.clone(), state.settings.auth.clone())
}

/// The demo's own HTTP handler endpoint, with `--demo` only.
fn demo_routes(state: &AppState) -> Router {
    if state.settings.demo {
        crate::demo::webhook::router()
    } else {
        Router::new()
    }
}

/// Threads of their own for HTTP requests, apart from the engine's runtime, at a lower CPU
/// priority. A page render or a flood of reads keeps these busy, never the threads the
/// engine's fetcher, workers and completer run on (sharing them, 50 connections reading
/// the overview held the drain to a tenth of its rate: the engine's tasks queued behind
/// renders). And when the CPU is short the engine's threads go first: requests are
/// answered more slowly rather than jobs being worked more slowly (`HTTP_NICE`).
pub struct HttpRuntime(tokio::runtime::Runtime);

/// How much lower the HTTP threads' priority is (Linux nice; any user may lower its own).
/// At +10 a busy HTTP thread gets about a tenth of a core it shares with a busy engine
/// thread, and all of it while the engine is idle. Under systemd or in a container the
/// process's threads compete as a group with other services, so this only ranks deck's
/// own threads.
const HTTP_NICE: i32 = 10;

impl HttpRuntime {
    pub fn start() -> std::io::Result<Self> {
        tokio::runtime::Builder::new_multi_thread()
            .thread_name("deck-http")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()
            .map(HttpRuntime)
    }

    /// Serve `app` on `listener` within `limits` until `shutdown` is cancelled (then
    /// finish open requests).
    pub fn serve(
        &self,
        listener: TcpListener,
        app: Router,
        limits: ConnectionLimits,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        // A listener belongs to the runtime that registered it: hand it over as a socket.
        let socket = listener.into_std();
        self.0.spawn(async move {
            match socket.and_then(TcpListener::from_std) {
                Ok(listener) => {
                    crate::connections::serve(listener, app, limits, shutdown).await;
                }
                Err(e) => tracing::error!(
                    event = "server.http_error",
                    error = %e,
                    "cannot hand the listening socket to the HTTP runtime: nothing is served"
                ),
            }
        })
    }

    /// Stop its threads without waiting for tasks still running (call once serving ended).
    pub fn stop(self) {
        self.0.shutdown_background();
    }
}

/// Lower the calling thread's CPU priority by `HTTP_NICE` (its blocking-pool threads, which
/// run the store's reads, included). Best effort: a refusal leaves the default priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // Relative to the process (its main thread), not to this thread: a blocking-pool
        // thread started by an HTTP thread inherits that thread's nice already.
        // SAFETY: plain system calls on this process's and this thread's own ids.
        let outcome = unsafe {
            let base = libc::getpriority(libc::PRIO_PROCESS, libc::getpid() as libc::id_t);
            let tid = libc::gettid() as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, base.saturating_add(HTTP_NICE))
        };
        if outcome != 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "HTTP thread keeps its CPU priority");
        }
    }
}
