//! Traces: the engine's spans (`deck_engine::trace`) exported over OTLP/HTTP with protobuf
//! when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (cargo
//! feature `otel`, on by default); nothing is exported otherwise. The API's request spans
//! (`deck_api`'s `traces`) go out with them.
//!
//! The exporter takes the standard variables as the OpenTelemetry SDKs do:
//! `OTEL_EXPORTER_OTLP_{,TRACES_}{ENDPOINT,HEADERS,TIMEOUT}`, `OTEL_SERVICE_NAME` (default
//! `deck`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`. Only the `http/protobuf`
//! protocol is built in (port 4318 on a collector), which keeps gRPC out of the binary.

/// The exporter, while it runs; [`Traces::shutdown`] sends what is still buffered.
#[derive(Default)]
pub struct Traces {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
    export: Export,
}

/// Where the spans go, for the line `deck serve` logs at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Export {
    /// No endpoint variable is set.
    #[default]
    Off,
    /// Sent over OTLP/HTTP to this URL.
    To(String),
    /// An endpoint is set but the exporter could not be built (the reason).
    Failed(String),
    /// The binary was built without the `otel` feature.
    #[cfg_attr(feature = "otel", allow(dead_code))]
    NotBuilt,
}

impl Export {
    /// One sentence for an operator: whether traces leave the process, and to where.
    pub fn describe(&self) -> String {
        match self {
            Export::Off => "traces are off: set OTEL_EXPORTER_OTLP_ENDPOINT (a collector's \
                            http://HOST:4318) to export them"
                .to_string(),
            Export::To(url) => format!("traces are exported over OTLP/HTTP to {url}"),
            Export::Failed(why) => format!("traces are off: {why}"),
            Export::NotBuilt => {
                "traces are off: this deck was built without the otel feature".to_string()
            }
        }
    }
}

impl Traces {
    /// Where the spans go.
    pub fn export(&self) -> &Export {
        &self.export
    }

    /// Send the spans still buffered and stop the exporter. Call it while the async runtime
    /// still exists: the export runs on it.
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: could not send the last traces to the OTLP endpoint: {e}");
        }
    }
}

/// The layer that hands the engine's spans to the OTLP exporter, when an endpoint is
/// configured: `None` (and nothing exported) otherwise, or when the exporter cannot be built
/// (said on stderr: logging is not up yet).
#[cfg(feature = "otel")]
pub fn layer<S>(
    runtime: &tokio::runtime::Handle,
) -> (Option<impl tracing_subscriber::Layer<S> + use<S>>, Traces)
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    match export::provider(runtime) {
        Ok(Some((provider, url))) => {
            let layer = export::layer(&provider);
            (
                Some(layer),
                Traces {
                    provider: Some(provider),
                    export: Export::To(url),
                },
            )
        }
        Ok(None) => (None, Traces::default()),
        Err(e) => {
            eprintln!("warning: traces are not exported: {e}");
            let headline = e.lines().next().unwrap_or_default().to_string();
            (
                None,
                Traces {
                    provider: None,
                    export: Export::Failed(headline),
                },
            )
        }
    }
}

/// Without the `otel` feature nothing is exported, whatever the environment says.
#[cfg(not(feature = "otel"))]
pub fn not_built() -> Traces {
    Traces {
        export: Export::NotBuilt,
    }
}

#[cfg(feature = "otel")]
mod export {
    use std::time::Duration;

    use async_trait::async_trait;
    use deck_engine::trace::TARGET;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
    use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithHttpConfig};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing::Level;
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::filter_fn;

    const ENDPOINT_VARS: [&str; 2] = [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ];
    /// Largest collector answer read (the OTLP answer is a tiny protobuf message).
    const MAX_ANSWER_BYTES: usize = 64 * 1024;

    fn env(name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.trim().is_empty())
    }

    /// The URL spans are posted to, as the exporter derives it: the traces variable as
    /// given, else the general endpoint with `/v1/traces` appended; `None` when neither is set.
    pub(super) fn endpoint() -> Option<String> {
        let [traces, general] = ENDPOINT_VARS;
        if let Some(url) = env(traces) {
            return Some(url.trim().to_string());
        }
        env(general).map(|url| format!("{}/v1/traces", url.trim().trim_end_matches('/')))
    }

    /// The tracer provider exporting to the configured endpoint, with that endpoint's URL;
    /// `None` when none is set.
    pub(super) fn provider(
        runtime: &tokio::runtime::Handle,
    ) -> Result<Option<(SdkTracerProvider, String)>, String> {
        let Some(url) = endpoint() else {
            return Ok(None);
        };
        for var in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(protocol) = env(var)
                && protocol != "http/protobuf"
            {
                return Err(format!(
                    "{var}={protocol} is not supported\n  help: deck sends http/protobuf \
                     (a collector's port 4318); unset {var} or set it to http/protobuf"
                ));
            }
        }
        let client = TokioClient::new(runtime.clone(), timeout())?;
        let exporter = SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_http_client(client)
            .build()
            .map_err(|e| format!("cannot set up the OTLP exporter: {e}"))?;
        let mut resource = Resource::builder();
        if env("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("deck");
        }
        let resource = resource
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        Ok(Some((
            SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource)
                .build(),
            url,
        )))
    }

    /// The OpenTelemetry layer: the engine's spans (and the API's request spans, same
    /// target), and the events logged inside them as span events.
    pub(super) fn layer<S>(provider: &SdkTracerProvider) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("deck"))
            // Every span is made in the same two files, on whichever tokio thread: source
            // location and thread say nothing; busy/idle time costs a clock read per poll.
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            // Only spans made for tracing: the runtime's own long-lived task spans (the
            // fetcher's, lasting the whole process) would be traces of their own.
            .with_filter(filter_fn(|meta| {
                if meta.is_span() {
                    meta.target() == TARGET
                } else {
                    *meta.level() <= Level::INFO
                }
            }))
    }

    /// `OTEL_EXPORTER_OTLP_{TRACES_,}TIMEOUT` in milliseconds, 10 s by default — the
    /// exporter leaves enforcing it to the client.
    fn timeout() -> Duration {
        [
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]
        .iter()
        .find_map(|v| env(v).and_then(|ms| ms.trim().parse().ok()))
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(10))
    }

    /// The HTTP client the binary already has (reqwest with rustls), run on its tokio
    /// runtime: the SDK's batch exporter thread has no runtime of its own and waits on the
    /// spawned request.
    #[derive(Debug)]
    struct TokioClient {
        client: reqwest::Client,
        runtime: tokio::runtime::Handle,
    }

    impl TokioClient {
        fn new(runtime: tokio::runtime::Handle, timeout: Duration) -> Result<Self, String> {
            let client = reqwest::Client::builder()
                .timeout(timeout)
                .build()
                .map_err(|e| format!("cannot build the HTTP client for OTLP: {e}"))?;
            Ok(TokioClient { client, runtime })
        }
    }

    #[async_trait]
    impl HttpClient for TokioClient {
        async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
            let request = reqwest::Request::try_from(request)?;
            let client = self.client.clone();
            self.runtime
                .spawn(async move {
                    let mut answer = client.execute(request).await?;
                    let mut response = Response::builder().status(answer.status());
                    if let Some(headers) = response.headers_mut() {
                        *headers = std::mem::take(answer.headers_mut());
                    }
                    let mut body = Vec::new();
                    while let Some(chunk) = answer.chunk().await? {
                        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                            return Err("the OTLP endpoint's answer is too large".into());
                        }
                        body.extend_from_slice(&chunk);
                    }
                    Ok(response.body(Bytes::from(body))?)
                })
                .await?
        }
    }
}
