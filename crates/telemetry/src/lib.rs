//! Logs, traces and metrics for every role of the fleet, and the HTTP server their endpoints
//! run on.
//!
//! Layout:
//! - [`init`]: the tracing subscriber: logs on stderr (text or one JSON object per line) and,
//!   when an OTLP endpoint is given, spans exported over OTLP/HTTP. Without an endpoint no
//!   exporter exists and spans cost what a disabled span costs.
//! - [`propagation`]: W3C trace context in and out of message headers, so the spans of the
//!   runner, the worker, external steps and the reviewer form one trace.
//! - [`metrics`]: the fleet's Prometheus metrics and the endpoint that serves them.
//! - [`events`]: the events every role has in common, each logged and counted in one call
//!   ([`events::DeadLettered`]).
//! - [`logged`]: untrusted text in a log line, its control and bidi characters escaped.
//! - [`server`]: the HTTP server of every role's endpoints: read timeouts, a connection cap,
//!   graceful shutdown.
//! - [`service`]: a serving role's life on the transport: reconnections counted, started,
//!   announced, stopped in order, the transport closed.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod events;
pub mod logged;
pub mod metrics;
pub mod propagation;
pub mod server;
pub mod service;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The spans exported as traces: Airlock's own, down to the per-message ones.
const TRACED: &str = "airlock=debug";

/// How a process reports.
#[derive(Debug, Clone)]
pub struct TelemetryConfig {
    /// The `service.name` of exported spans (`airlock-worker`, …).
    pub service: String,
    /// Log filter when `RUST_LOG` is unset.
    pub default_filter: String,
    /// One JSON object per log line instead of text.
    pub json_logs: bool,
    /// The OTLP/HTTP endpoint (e.g. `http://127.0.0.1:4318`); `None` exports nothing.
    pub otlp_endpoint: Option<String>,
}

/// Telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("telemetry: {0}")]
pub struct TelemetryError(String);

/// Keeps the span exporter alive; [`Telemetry::shutdown`] flushes it.
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// Installs the global subscriber (once per process; later calls keep the first).
pub fn init(config: &TelemetryConfig) -> Result<Telemetry, TelemetryError> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.default_filter));
    let logs = if config.json_logs {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter).boxed()
    };
    let provider = match &config.otlp_endpoint {
        None => None,
        Some(endpoint) => Some(provider(&config.service, endpoint)?),
    };
    let traces = provider.as_ref().map(|provider| {
        propagation::install();
        // Airlock's own spans, per message at debug level, whatever the log filter says.
        tracing_opentelemetry::layer().with_tracer(provider.tracer("airlock")).with_filter(EnvFilter::new(TRACED))
    });
    let _ = tracing_subscriber::registry().with(logs).with(traces).try_init();
    Ok(Telemetry { provider })
}

fn provider(service: &str, endpoint: &str) -> Result<SdkTracerProvider, TelemetryError> {
    // The exporter's HTTP client refuses to start without one; another part of the process
    // may have installed it already, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
        .build()
        .map_err(|e| TelemetryError(e.to_string()))?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(service.to_owned()).build())
        .build())
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports the spans ended so far without waiting for the next batch.
    pub async fn flush(&self) {
        if let Some(provider) = self.provider.clone() {
            let _ = tokio::task::spawn_blocking(move || provider.force_flush()).await;
        }
    }

    /// Flushes and stops the exporter. Its shutdown blocks, so it runs off the async runtime.
    pub async fn shutdown(self) {
        if let Some(provider) = self.provider {
            let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        }
    }
}
