//! Logging and tracing for both binaries: `RUST_LOG`-style filtering to stderr (text or JSON lines),
//! plus OpenTelemetry spans exported over OTLP/gRPC when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
//!
//! The operator passes its trace context to worker Jobs as a W3C `TRACEPARENT` environment variable
//! (there is no request to carry a header), so a worker's spans join the Migration's trace;
//! [`remote_parent`] turns that variable back into a parent context.

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::collections::HashMap;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Environment variable naming the OTLP collector (the OpenTelemetry SDK convention).
pub const OTLP_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// Environment variable carrying a W3C trace context into a worker process.
pub const TRACEPARENT_ENV: &str = "TRACEPARENT";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot build the OTLP span exporter for {endpoint}: {source}")]
    Exporter {
        endpoint: String,
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// Keeps the tracer provider alive; dropping it flushes spans still queued for export.
#[must_use = "dropping the guard shuts trace export down"]
pub struct Guard {
    provider: Option<SdkTracerProvider>,
}

impl Guard {
    /// Whether spans are exported (an OTLP endpoint was configured).
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }
}

/// `LOG_FORMAT` asks for JSON lines (`json`, any case); anything else, or unset, keeps text.
fn log_format_is_json(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("json"))
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            // Export failures at shutdown are not worth failing the process for.
            let _ = provider.shutdown();
        }
    }
}

/// Install the global subscriber for `service` (the OpenTelemetry `service.name`). `json`, or
/// `LOG_FORMAT=json` in the environment (how the operator hands its own log format to worker pods), selects
/// one JSON object per line for log shippers. The filter comes from `RUST_LOG`, else `default_filter`.
/// A second call (tests) keeps the first subscriber.
pub fn init(service: &'static str, json: bool, default_filter: &str) -> Result<Guard, Error> {
    let json = json || log_format_is_json(std::env::var("LOG_FORMAT").ok().as_deref());
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt_text = (!json).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
    });
    let fmt_json = json.then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
    });

    let provider = match otlp_endpoint() {
        Some(endpoint) => Some(tracer_provider(service, &endpoint)?),
        None => None,
    };
    let otel = provider
        .as_ref()
        .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service)));
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());

    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(fmt_text)
        .with(fmt_json)
        .with(otel)
        .try_init();
    Ok(Guard { provider })
}

fn otlp_endpoint() -> Option<String> {
    std::env::var(OTLP_ENDPOINT_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
}

fn tracer_provider(service: &'static str, endpoint: &str) -> Result<SdkTracerProvider, Error> {
    use opentelemetry_otlp::WithExportConfig;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .map_err(|source| Error::Exporter {
            endpoint: endpoint.to_string(),
            source,
        })?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(service).build())
        .build())
}

/// The trace context a parent process passed in `TRACEPARENT`, if any and well-formed.
pub fn remote_parent() -> Option<opentelemetry::Context> {
    let value = std::env::var(TRACEPARENT_ENV).ok()?;
    parent_from_traceparent(&value)
}

/// Parse a W3C `traceparent` value into a context whose span is the remote parent.
pub fn parent_from_traceparent(value: &str) -> Option<opentelemetry::Context> {
    use opentelemetry::trace::TraceContextExt;
    let carrier = HashMap::from([("traceparent".to_string(), value.trim().to_string())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// Make `span` a child of the trace in `TRACEPARENT` (no-op when absent or malformed).
pub fn adopt_remote_parent(span: &tracing::Span) {
    if let Some(cx) = remote_parent() {
        let _ = span.set_parent(cx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt;

    #[test]
    fn traceparent_round_trips_trace_and_span_ids() {
        let cx = parent_from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .expect("valid traceparent");
        let span = cx.span();
        let sc = span.span_context();
        assert_eq!(sc.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_remote());
        assert!(sc.is_sampled());
    }

    #[test]
    fn malformed_or_zero_traceparent_is_ignored() {
        assert!(parent_from_traceparent("not a traceparent").is_none());
        assert!(parent_from_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01").is_none());
        assert!(parent_from_traceparent("").is_none());
    }

    #[test]
    fn log_format_json_selects_json_lines() {
        assert!(log_format_is_json(Some("json")));
        assert!(log_format_is_json(Some(" JSON ")));
        assert!(!log_format_is_json(Some("text")));
        assert!(!log_format_is_json(Some("")));
        assert!(!log_format_is_json(None));
    }
}
