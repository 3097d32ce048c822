//! Logging and traces for the operator. Each reconcile is a span whose parent is the Migration's own
//! trace (trace id derived from the Migration's uid, see [`crate::jobs::traceparent`]), the same
//! trace the worker Jobs join through `TRACEPARENT`: one Migration, one trace, across processes.

use kube::ResourceExt;
use mssql_pg_crds::Migration;

pub use mssql_pg_telemetry::Guard;

/// Install the global subscriber; OTLP export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
pub fn init(json: bool) -> Result<Guard, mssql_pg_telemetry::Error> {
    mssql_pg_telemetry::init("mssql-pg-operator", json, "info,kube=warn")
}

/// The span one reconcile of `mig` runs in.
pub fn reconcile_span(mig: &Migration) -> tracing::Span {
    let span = tracing::info_span!(
        "reconcile",
        migration = %mig.name_any(),
        namespace = %mig.namespace().unwrap_or_default(),
        generation = mig.metadata.generation.unwrap_or_default(),
    );
    if let Some(cx) = crate::jobs::traceparent(mig, "reconcile")
        .and_then(|tp| mssql_pg_telemetry::parent_from_traceparent(&tp))
    {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let _ = span.set_parent(cx);
    }
    span
}
