//! An endpoint's `concurrency` is what limits how many of its jobs the engine starts: with
//! many free workers, only that many are processing (attempt counted, request sent); the
//! others wait unstarted, with no attempt spent.

#[allow(dead_code)] // run_remote_task: the other tests' helper
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use deck_engine::{Engine, EngineConfig, EnqueueRequest, HandlerRegistry, JobId, JobState};
use deck_http_handlers::{HttpHandlerConfig, register};
use support::{serve_jobs_endpoint, sqlite_store};
use tokio::sync::{Notify, watch};

/// An endpoint that holds every request until released, counting those in flight.
#[derive(Clone)]
struct Holding {
    inside: Arc<AtomicUsize>,
    max_inside: Arc<AtomicUsize>,
    arrived: Arc<Notify>,
    release: watch::Receiver<bool>,
}

async fn hold(State(h): State<Holding>) -> &'static str {
    let now = h.inside.fetch_add(1, Ordering::SeqCst) + 1;
    h.max_inside.fetch_max(now, Ordering::SeqCst);
    h.arrived.notify_waiters();
    let mut release = h.release.clone();
    let _ = release.wait_for(|open| *open).await;
    h.inside.fetch_sub(1, Ordering::SeqCst);
    "{}"
}

impl Holding {
    async fn wait_inside(&self, n: usize) {
        let waited = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let arrived = self.arrived.notified();
                tokio::pin!(arrived);
                arrived.as_mut().enable();
                if self.inside.load(Ordering::SeqCst) >= n {
                    return;
                }
                arrived.await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "fewer than {n} requests arrived within 30 s"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoints_concurrency_limits_the_jobs_started_not_only_the_requests() {
    let (open, release) = watch::channel(false);
    let holding = Holding {
        inside: Arc::default(),
        max_inside: Arc::default(),
        arrived: Arc::default(),
        release,
    };
    let addr = serve_jobs_endpoint(post(hold), holding.clone()).await;
    let mut endpoint = HttpHandlerConfig::new(format!("http://{addr}/jobs"), &["remote.*"]);
    endpoint.concurrency = 2;
    let mut handlers = HandlerRegistry::new();
    register(&mut handlers, &[endpoint], &|_| None).unwrap();
    let (_dir, store) = sqlite_store().await;
    let config = EngineConfig {
        worker_count: Some(50),
        poll_interval: Duration::from_millis(100),
        ..EngineConfig::default()
    };
    let engine = Engine::start(store.clone(), handlers, config)
        .await
        .unwrap();

    let mut ids: Vec<JobId> = Vec::new();
    for _ in 0..10 {
        let req = EnqueueRequest::new("default", "remote.task", "{}");
        ids.push(engine.enqueue(req).await.unwrap().id);
    }
    holding.wait_inside(2).await;
    let mut processing = 0;
    for id in &ids {
        let job = store.get_job(*id).await.unwrap().unwrap();
        match job.state {
            JobState::Processing => processing += 1,
            JobState::Pending | JobState::Fetched => {
                assert_eq!(job.attempt, 0, "an unsent job spent no attempt: {job:?}")
            }
            other => panic!("job {id} is {other}"),
        }
    }
    assert_eq!(processing, 2, "only the endpoint's concurrency is started");

    open.send(true).unwrap();
    for id in &ids {
        let outcome = engine.wait(*id, Duration::from_secs(30)).await.unwrap();
        let job = outcome.job().cloned().unwrap();
        assert_eq!((job.state, job.attempt), (JobState::Succeeded, 1));
    }
    assert_eq!(holding.max_inside.load(Ordering::SeqCst), 2);
    engine.shutdown().await;
}
