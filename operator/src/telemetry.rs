//! Logging setup: `RUST_LOG`-style filtering, JSON lines or human-readable text.

use tracing_subscriber::EnvFilter;

/// Install the global subscriber. `json` selects one JSON object per line (for log shippers).
pub fn init(json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,kube=warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    // A second init (tests) is harmless; the first subscriber stays.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
