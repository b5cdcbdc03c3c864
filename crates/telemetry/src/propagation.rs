//! W3C trace context (`traceparent`, `tracestate`) carried in message headers.

use std::collections::BTreeMap;

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Makes W3C trace context the process's propagation format.
pub fn install() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
}

/// Writes the trace context of `span` into `headers` (nothing when no trace is recorded).
pub fn inject(span: &tracing::Span, headers: &mut BTreeMap<String, String>) {
    let context = span.context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut Headers(headers))
    });
}

/// Makes `span` a child of the trace context found in `headers`, if any.
pub fn adopt(span: &tracing::Span, headers: &BTreeMap<String, String>) {
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&ReadHeaders(headers)));
    let _ = span.set_parent(parent);
}

struct Headers<'a>(&'a mut BTreeMap<String, String>);

impl Injector for Headers<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

struct ReadHeaders<'a>(&'a BTreeMap<String, String>);

impl Extractor for ReadHeaders<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}
