//! What the HTTP handler tests stand on: a loopback endpoint, a fresh store, and one
//! `remote.*` job run to its end.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::MethodRouter;
use deck_engine::{Engine, EnqueueRequest, Store, StoreOptions, WaitOutcome};

/// Serve `route` at `/jobs` on a loopback port for the rest of the test: its address.
pub async fn serve_jobs_endpoint<S>(route: MethodRouter<S>, state: S) -> SocketAddr
where
    S: Clone + Send + Sync + 'static,
{
    let app = Router::new().route("/jobs", route).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A fresh SQLite store; it lives as long as the returned directory.
pub async fn sqlite_store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deck.db");
    let store = deck_engine::store::sqlite::open(path.to_str().unwrap(), &StoreOptions::default())
        .await
        .unwrap();
    (dir, store)
}

/// Enqueue one `remote.task` job with `payload` and wait for its outcome.
pub async fn run_remote_task(engine: &Engine, payload: String) -> WaitOutcome {
    let req = EnqueueRequest::new("default", "remote.task", payload);
    let (_, outcome) = engine
        .enqueue_and_wait(req, Duration::from_secs(30))
        .await
        .unwrap();
    outcome
}
