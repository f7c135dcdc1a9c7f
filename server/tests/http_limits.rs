//! The real `deck serve` bounds what a client can hold (`[http]`): half-sent requests and
//! stalled bodies are cut, oversized declared bodies are refused before they are sent,
//! connections over the cap wait — and long polls and the live stream still outlast the
//! header timeout, because only reading the request is timed.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;

use common::{PATIENCE, Server, sqlite_url};
use serde_json::Value;

/// Start `deck serve --no-workers` with this `[http]` table in its `deck.toml`.
fn server_with(dir: &Path, http: &str) -> Server {
    std::fs::write(dir.join("deck.toml"), format!("[http]\n{http}\n")).unwrap();
    Server::start(dir, "deck", &sqlite_url(dir), &["--no-workers"], &[])
}

/// A connection whose reads give up after `PATIENCE`, so a server that never answers fails
/// the test instead of hanging it.
fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream
}

/// Read until the server closes the connection.
fn read_all(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        // A reset after the server closed a connection it had not finished reading.
        Err(e) if e.kind() == ErrorKind::ConnectionReset && !raw.is_empty() => {}
        Err(e) => return Err(e),
    }
    Ok(String::from_utf8_lossy(&raw).into_owned())
}

/// Read exactly one response (head and `Content-Length` body) off a kept-alive connection.
fn read_response(stream: &mut TcpStream) -> String {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).expect("a response head");
        raw.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&raw).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).expect("a response body");
    head + &String::from_utf8_lossy(&body)
}

/// Send raw `request` on a fresh connection and read the one response to it; the
/// connection stays open for more.
fn exchange(addr: SocketAddr, request: &str) -> (TcpStream, String) {
    let mut stream = connect(addr);
    stream.write_all(request.as_bytes()).unwrap();
    let answer = read_response(&mut stream);
    (stream, answer)
}

const JSON: &str = "application/json";
const FORM: &str = "application/x-www-form-urlencoded";

/// A raw POST to `path` that declares a `length`-byte body of `content_type` (after the
/// `extra` header lines) and sends `sent` of it.
fn post(path: &str, content_type: &str, length: usize, extra: &str, sent: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: deck\r\nContent-Type: {content_type}\r\n\
         Content-Length: {length}\r\n{extra}\r\n{sent}"
    )
}

/// The raw request that enqueues one job, kept alive.
fn enqueue_request() -> String {
    let job = r#"{"queue": "q", "type": "t"}"#;
    post("/api/v1/jobs", JSON, job.len(), "", job)
}

fn status(response: &str) -> u16 {
    response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    let head = response.split("\r\n\r\n").next()?;
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn json_body(response: &str) -> Value {
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"))
}

#[test]
fn a_half_sent_request_and_an_idle_connection_are_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(dir.path(), "header_read_timeout = \"1s\"");

    let mut half = connect(server.addr);
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: deck\r\nX-Slow: ")
        .unwrap();
    let mut silent = connect(server.addr);

    for (what, stream) in [("half-sent request", &mut half), ("silent", &mut silent)] {
        match read_all(stream) {
            Ok(answer) => assert!(
                !answer.contains("200 OK"),
                "{what}: the request was never completed, yet: {answer}"
            ),
            Err(e) => panic!(
                "{what}: the server held the connection open ({e})\n{}",
                server.log_text()
            ),
        }
    }
    // The server still serves complete requests.
    assert_eq!(common::http_get(server.addr, "/healthz").unwrap().0, 200);
}

#[test]
fn a_huge_declared_body_is_refused_before_it_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(dir.path(), "");

    // The API: its JSON error shape, without waiting for a byte of the body (the client
    // asks first with `Expect: 100-continue` and gets the refusal instead of a go-ahead).
    let huge = 100_000_000_000;
    let api = post("/api/v1/jobs", JSON, huge, "Expect: 100-continue\r\n", "");
    let (_api, answer) = exchange(server.addr, &api);
    assert_eq!(status(&answer), 413, "{answer}");
    let body = json_body(&answer);
    assert_eq!(body["error"]["code"], "payload_too_large", "{answer}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("http.max_body_bytes"),
        "{answer}"
    );

    // A console form post: a plain 413.
    let form = post("/fn/queue/state", FORM, huge, "", "");
    let (_form, answer) = exchange(server.addr, &form);
    assert_eq!(status(&answer), 413, "{answer}");
    assert!(
        header(&answer, "content-type").is_some_and(|t| t.starts_with("text/plain")),
        "{answer}"
    );
}

#[test]
fn a_body_that_stalls_is_answered_408() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(dir.path(), "request_body_timeout = \"1s\"");

    let api = post("/api/v1/jobs", JSON, 100, "", "{\"queue\":");
    let (_api, answer) = exchange(server.addr, &api);
    assert_eq!(status(&answer), 408, "{answer}");
    assert_eq!(json_body(&answer)["error"]["code"], "request_timeout");

    let form = post("/fn/queue/state", FORM, 100, "", "queue=");
    let (_form, answer) = exchange(server.addr, &form);
    assert_eq!(status(&answer), 408, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_and_the_live_stream_outlast_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(dir.path(), "header_read_timeout = \"1s\"");
    let client = reqwest::Client::new();

    // No workers run, so the job stays pending and the poll lasts its whole wait.
    let enqueued: Value = client
        .post(format!("http://{}/api/v1/jobs", server.addr))
        .header("content-type", "application/json")
        .body(r#"{"queue": "q", "type": "t"}"#)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap();
    let id = enqueued["id"].as_str().expect("an id").to_string();
    let polled = client
        .get(format!("http://{}/api/v1/jobs/{id}?wait=3s", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(polled.status(), 200);
    let polled: Value = serde_json::from_slice(&polled.bytes().await.unwrap()).unwrap();
    assert_eq!(polled["timed_out"], true, "{polled}");

    // The live stream pushes a frame per 2 s tick: three frames span two ticks.
    let mut live = client
        .get(format!("http://{}/live", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    let mut text = String::new();
    while text.matches("\n\n").count() < 3 {
        let chunk = live.chunk().await.unwrap().expect("the stream stays open");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[test]
fn connections_beyond_the_cap_wait_until_one_closes() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(
        dir.path(),
        "max_connections = 1\nheader_read_timeout = \"60s\"",
    );
    // Server::start's own health checks closed their connections; this one takes the only
    // slot and keeps it (keep-alive).
    let (mut first, enqueued) = exchange(server.addr, &enqueue_request());
    assert_eq!(status(&enqueued), 201, "{enqueued}");
    let id = json_body(&enqueued)["id"].as_str().unwrap().to_string();

    let mut second = connect(server.addr);
    second
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: deck\r\n\r\n")
        .unwrap();
    // Absence can only be seen over a window: a one-second long poll on the first
    // connection (no worker runs the job) is it. The in-process test in connections.rs
    // proves the cap without one; this proves `http.max_connections` reaches it.
    write!(
        first,
        "GET /api/v1/jobs/{id}?wait=1s HTTP/1.1\r\nHost: deck\r\n\r\n"
    )
    .unwrap();
    let polled = read_response(&mut first);
    assert_eq!(status(&polled), 200, "{polled}");
    second.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    match second.read(&mut byte) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => {
            panic!("the second connection was served while the first held the only slot: {other:?}")
        }
    }
    second.set_nonblocking(false).unwrap();

    drop(first);
    assert_eq!(status(&read_response(&mut second)), 200);
}

#[test]
fn sigterm_with_a_long_poll_and_an_idle_connection_open_still_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = server_with(dir.path(), "");
    let (mut idle, enqueued) = exchange(server.addr, &enqueue_request());
    let id = json_body(&enqueued)["id"].as_str().unwrap().to_string();
    let mut polling = connect(server.addr);
    write!(
        polling,
        "GET /api/v1/jobs/{id}?wait=60s HTTP/1.1\r\nHost: deck\r\n\r\n"
    )
    .unwrap();
    let status = server.terminate();
    assert!(status.success(), "{status}\n{}", server.log_text());
    // Both connections end with the process: read to the end without hanging. The poll may
    // not have been read yet when the server stopped accepting work, and a socket closed
    // with unread input ends in a reset: that is an end too.
    read_all(&mut idle).unwrap();
    if let Err(e) = read_all(&mut polling) {
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
    }
}
