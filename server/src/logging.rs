//! Logs go to stderr (stdout is reserved for command answers such as `deck stats --json`).
//! Filter: `DECK_LOG`, else `RUST_LOG`, else the command's default level.
//! Format: `DECK_LOG_FORMAT=json` for one JSON object per line.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

pub fn init(default_level: &str) {
    let filter = std::env::var("DECK_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new(default_level));
    let json = std::env::var("DECK_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_writer(std::io::stderr);
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
