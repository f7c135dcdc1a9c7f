//! The `deck` command line as an operator meets it: helpful failures, a round trip through
//! `enqueue` and `stats`, health endpoints, graceful shutdown.

mod common;

use common::*;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a command that must fail wrote to stderr.
fn failure(out: &std::process::Output) -> String {
    assert!(!out.status.success(), "it succeeded: {}", stdout(out));
    stderr(out)
}

/// `deck enqueue` of a `job_type` job into `queue` on `db`, with `more` options.
fn enqueue<'a>(db: &'a str, queue: &'a str, job_type: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "enqueue",
        "--database",
        db,
        "--queue",
        queue,
        "--type",
        job_type,
    ];
    args.extend_from_slice(more);
    args
}

#[test]
fn a_bad_config_fails_with_every_problem_and_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("deck.toml"),
        "listen = \"nowhere\"\n[engine]\npoll_interval = \"10ms\"\nworkrs = 3\n",
    )
    .unwrap();
    let err = failure(&run(deck(dir.path()).args(["serve"])));
    assert!(err.contains("3 problems"), "{err}");
    assert!(err.contains("listen"), "{err}");
    assert!(err.contains("127.0.0.1:8080"), "{err}");
    assert!(err.contains("engine.poll_interval"), "{err}");
    assert!(err.contains("did you mean `engine.workers`"), "{err}");
    assert!(!dir.path().join("deck.db").exists(), "nothing was created");
}

#[test]
fn an_environment_variable_with_a_bad_value_names_itself() {
    let dir = tempfile::tempdir().unwrap();
    let err = failure(&run(deck(dir.path())
        .args(["stats"])
        .env("DECK_ENGINE__PREFETCH", "lots")));
    assert!(err.contains("DECK_ENGINE__PREFETCH"), "{err}");
}

#[test]
fn an_unrelated_deck_variable_warns_and_does_not_stop_deck() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    assert!(
        run(deck(dir.path()).args(["migrate", "--database", &db]))
            .status
            .success()
    );
    let out = run(deck(dir.path())
        .args(["stats", "--json", "--database", &db])
        .env("DECK_TOKN", "abc"));
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err.matches("DECK_TOKN is not a deck setting").count(),
        1,
        "warned once, by name: {err}"
    );
}

#[test]
fn the_readme_api_token_variable_is_not_warned_about() {
    // The README's API examples export DECK_TOKEN; the shell that runs deck has it too.
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    let out = run(deck(dir.path())
        .args(["migrate", "--database", &db])
        .env("DECK_TOKEN", "abc"));
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(!err.contains("DECK_TOKEN"), "{err}");
}

#[test]
fn an_unknown_database_url_says_what_to_use() {
    let dir = tempfile::tempdir().unwrap();
    let err = failure(&run(deck(dir.path()).args([
        "stats",
        "--database",
        "postgres://x",
    ])));
    assert!(err.contains("sqlite://deck.db"), "{err}");
}

#[test]
fn enqueue_then_stats_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    let first = [
        "--payload",
        r#"{"to":"a@b.c"}"#,
        "--tag",
        "x",
        "--priority",
        "5",
    ];
    let out = run(deck(dir.path()).args(enqueue(&db, "mail", "email.send", &first)));
    assert!(out.status.success(), "{}", stderr(&out));
    let id = stdout(&out).trim().to_string();
    assert!(id.parse::<deck_engine::JobId>().is_ok(), "{id:?}");

    let delayed = ["--delay", "1h"];
    let out = run(deck(dir.path()).args(enqueue(&db, "mail", "email.send", &delayed)));
    assert!(out.status.success(), "{}", stderr(&out));

    let out = run(deck(dir.path()).args(["stats", "--json", "--database", &db]));
    assert!(out.status.success(), "{}", stderr(&out));
    let stats: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(stats["pillars"]["hot"], 2);
    assert_eq!(stats["pillars"]["archive"], 0);
    assert_eq!(stats["summary"]["pending"], 1);
    assert_eq!(stats["summary"]["scheduled"], 1);
    let queues = stats["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 1);
    assert_eq!(queues[0]["queue"], "mail");
}

#[test]
fn the_enqueue_command_the_empty_console_suggests_works_as_printed() {
    let dir = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(DECK).parent().unwrap();
    // As pasted into a shell beside `deck serve` on its default database.
    let out = run(std::process::Command::new("sh")
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("NO_COLOR", "1")
        .args(["-c", deck_app::components::ENQUEUE_EXAMPLE]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).trim().parse::<deck_engine::JobId>().is_ok());
    let out = run(deck(dir.path()).args(["stats", "--json"]));
    let stats: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(stats["queues"][0]["queue"], "emails");
}

#[test]
fn stats_on_a_missing_file_refuses_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("dekc.db");
    let url = format!("sqlite://{}", typo.display());
    let err = failure(&run(deck(dir.path()).args(["stats", "--database", &url])));
    assert!(
        err.contains(&typo.display().to_string()),
        "names the path: {err}"
    );
    assert!(
        err.contains("deck migrate"),
        "says how to create one: {err}"
    );
    assert!(!typo.exists(), "nothing was created");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "no file at all: {left:?}");
}

#[test]
fn enqueue_rejects_bad_input_before_touching_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    let bad = ["--payload", "{nope"];
    let err = failure(&run(deck(dir.path()).args(enqueue(&db, "q", "t", &bad))));
    assert!(err.contains("payload"), "{err}");
    assert!(err.contains("JSON"), "{err}");
    assert!(!dir.path().join("deck.db").exists());
}

#[test]
fn serve_answers_health_and_readiness_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), "serve", &sqlite_url(dir.path()), &[], &[]);

    let (code, body) = http_get(server.addr, "/healthz").unwrap();
    assert_eq!((code, body.trim()), (200, "ok"));

    let (code, body) = http_get(server.addr, "/readyz").unwrap();
    assert_eq!(code, 200, "{body}");
    let ready: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ready["status"], "ready");
    let checks = ready["checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["name"] == "database" && c["status"] == "ok")
    );

    let (code, body) = http_get(server.addr, "/metrics").unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("deck_jobs{pillar=\"active\"} 0"), "{body}");
    assert!(body.contains("deck_workers_total"), "{body}");

    let status = server.terminate();
    assert!(status.success(), "exit {status}:\n{}", server.log_text());
    let log = server.log_text();
    assert!(log.contains("stopped"), "{log}");
    assert!(
        log.contains("traces are off"),
        "says where traces go: {log}"
    );
}

#[test]
fn serve_says_where_it_exports_traces() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on the discard port: the line is about the configuration, not delivery.
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9/")];
    let mut server = Server::start(dir.path(), "serve", &sqlite_url(dir.path()), &[], &env);
    server.terminate();
    let log = server.log_text();
    assert!(
        log.contains("traces are exported over OTLP/HTTP to http://127.0.0.1:9/v1/traces"),
        "{log}"
    );
}

#[test]
fn a_taken_port_is_reported_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let err = failure(&run(deck(dir.path()).args(["serve", "--listen", &addr])));
    assert!(err.contains("--listen"), "{err}");
}
