//! Logs: text or JSON lines on stdout, filtered by `RUST_LOG` (default `info`).

use nodewright_model::config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the process's tracing subscriber. Call once, after the configuration is loaded.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
