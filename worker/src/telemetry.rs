//! Logs: text or JSON lines on stdout, filtered by `RUST_LOG` (default `info`); colours only on a
//! terminal (a container's log is a file).

use std::io::IsTerminal;

use nodewright_model::config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the process's tracing subscriber. Call once, after the configuration is loaded.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
