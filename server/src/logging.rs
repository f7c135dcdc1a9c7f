//! Logs go to stderr (stdout is reserved for command answers such as `deck stats --json`).
//! Filter: `DECK_LOG`, else `RUST_LOG`, else the command's default level.
//! Format: `DECK_LOG_FORMAT=json` for one JSON object per line.
//!
//! The spans made for tracing (target `deck_engine::trace`: one per job run, per claim, per
//! commit) are left out of the log lines unless the filter names that target; with an
//! OTLP endpoint configured they go to the exporter (see `traces`).

use std::io::IsTerminal;

use deck_engine::trace::TARGET;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::traces::Traces;

/// Install logging, and trace export when configured (it runs on `runtime`).
pub fn init(default_level: &str, runtime: &tokio::runtime::Handle) -> Traces {
    let (filter, text) = std::env::var("DECK_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|f| EnvFilter::try_new(&f).ok().map(|filter| (filter, f)))
        .unwrap_or_else(|| (EnvFilter::new(default_level), default_level.to_string()));
    // A span per job would cost a formatted line prefix per job, and print on every line
    // logged inside it; asked for by name, they are shown.
    let filter = if text.contains(TARGET) {
        filter
    } else {
        match format!("{TARGET}=off").parse() {
            Ok(directive) => filter.add_directive(directive),
            Err(_) => filter,
        }
    };
    let json = std::env::var("DECK_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_writer(std::io::stderr);
    let fmt = if json {
        fmt.json().with_filter(filter).boxed()
    } else {
        fmt.with_filter(filter).boxed()
    };
    let (otel, traces) = otel_layer(runtime);
    let layers: Vec<BoxedLayer> = std::iter::once(fmt).chain(otel).collect();
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = tracing_subscriber::registry().with(layers).try_init();
    traces
}

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

#[cfg(feature = "otel")]
fn otel_layer(runtime: &tokio::runtime::Handle) -> (Option<BoxedLayer>, Traces) {
    let (layer, traces) = crate::traces::layer(runtime);
    (layer.map(Layer::boxed), traces)
}

#[cfg(not(feature = "otel"))]
fn otel_layer(_runtime: &tokio::runtime::Handle) -> (Option<BoxedLayer>, Traces) {
    (None, crate::traces::not_built())
}
