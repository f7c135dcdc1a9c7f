//! Accepting and serving HTTP/1.1 connections with bounds `axum::serve` does not offer:
//!
//! - at most `http.max_connections` are served at once. The accept loop takes a slot before
//!   it accepts, so further connections wait, unanswered, in the kernel's listen backlog
//!   until a slot frees (a burst is queued, not refused);
//! - a client must send a request's line and headers within `http.header_read_timeout`, and
//!   an idle keep-alive connection is closed after the same time, so a stalled client holds
//!   its slot only that long. The timer runs only while hyper reads a request head, never
//!   while a response is being produced: long polls and the live stream are not cut.
//!
//! Shutdown is what `axum::serve(..).with_graceful_shutdown` does: stop accepting, let each
//! connection finish the request it is serving, then close it.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The connection bounds (`[http]`).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
}

impl From<&crate::config::HttpSettings> for ConnectionLimits {
    fn from(s: &crate::config::HttpSettings) -> Self {
        ConnectionLimits {
            max_connections: s.max_connections as usize,
            header_read_timeout: s.header_read_timeout,
        }
    }
}

/// Serve `app` on `listener` until `shutdown` is cancelled and every open connection has
/// finished its request.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let service = TowerToHyperService::new(app);
    let mut saturated = false;

    loop {
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                saturated = false;
                slot
            }
            Err(_) => {
                if !saturated {
                    saturated = true;
                    tracing::warn!(
                        event = "http.connections_full",
                        max_connections = limits.max_connections,
                        "all {} connections are in use; new ones wait until one closes \
                         (http.max_connections)",
                        limits.max_connections
                    );
                }
                tokio::select! {
                    slot = slots.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        // Never closed; if it were, no connection could be served anyway.
                        Err(_) => break,
                    },
                    _ = shutdown.cancelled() => break,
                }
            }
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let connection =
            graceful.watch(http.serve_connection(TokioIo::new(stream), service.clone()));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                // Header timeouts, resets and malformed requests: the client's doing.
                tracing::debug!(event = "http.connection_error", error = %e);
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    // Out of file descriptors, most likely: retrying at once would spin, and open
    // connections closing is what frees them.
    tracing::error!(event = "http.accept_error", error = %e, "cannot accept a connection: {e}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio::sync::mpsc;

    use super::*;

    /// Handlers that count how many run at once and wait for the test to let each go.
    #[derive(Clone)]
    struct Gate {
        running: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
        started: mpsc::UnboundedSender<()>,
        release: Arc<Semaphore>,
    }

    async fn held(axum::extract::State(g): axum::extract::State<Gate>) -> &'static str {
        let now = g.running.fetch_add(1, Ordering::SeqCst) + 1;
        g.most.fetch_max(now, Ordering::SeqCst);
        let _ = g.started.send(());
        if let Ok(permit) = g.release.acquire().await {
            permit.forget();
        }
        g.running.fetch_sub(1, Ordering::SeqCst);
        "done"
    }

    async fn request(addr: std::net::SocketAddr) -> TcpStream {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /held HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        stream
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_beyond_the_cap_are_not_served_concurrently() {
        const CAP: usize = 2;
        const CLIENTS: usize = 6;
        let (started_tx, mut started) = mpsc::unbounded_channel();
        let gate = Gate {
            running: Arc::default(),
            most: Arc::default(),
            started: started_tx,
            release: Arc::new(Semaphore::new(0)),
        };
        let app = Router::new()
            .route("/held", get(held))
            .with_state(gate.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();

        // Every client is connected and its request written before the server accepts
        // anything, so a server without a cap would start all of them at once.
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            clients.push(request(addr).await);
        }
        let shutdown = CancellationToken::new();
        let limits = ConnectionLimits {
            max_connections: CAP,
            header_read_timeout: Duration::from_secs(60),
        };
        let server = tokio::spawn(serve(listener, app, limits, shutdown.clone()));

        for _ in 0..CAP {
            started.recv().await.unwrap();
        }
        // Let one request finish at a time; each freed slot admits exactly one more.
        for _ in CAP..CLIENTS {
            gate.release.add_permits(1);
            started.recv().await.unwrap();
        }
        gate.release.add_permits(CAP);
        for mut client in clients {
            let mut answer = String::new();
            client.read_to_string(&mut answer).await.unwrap();
            assert!(answer.ends_with("done"), "{answer}");
        }
        assert_eq!(gate.most.load(Ordering::SeqCst), CAP);

        shutdown.cancel();
        server.await.unwrap();
    }
}
