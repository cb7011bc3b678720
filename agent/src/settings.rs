//! The agent's flags (each also an environment variable), checked before anything starts.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use url::Url;

use crate::imds::DEFAULT_IMDS_URL;

/// The shortest poll interval accepted.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// The longest poll interval accepted: a Preempt gives 30 s of notice.
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(60);

/// nodewright's node agent: publishes the VM's Azure Scheduled Events on its Node (condition
/// nodewright.io/VMEventScheduled, annotation nodewright.io/scheduled-event, an Event each) and
/// acknowledges those nodewright.io/scheduled-event-ack asks for.
#[derive(Debug, Parser)]
#[command(name = "nodewright-node-agent", version)]
pub struct Settings {
    /// The Node this agent runs on (the downward API's spec.nodeName).
    #[arg(long, env = "NODE_NAME", value_parser = node_name)]
    pub node_name: String,

    /// The metadata service's base URL; the agent reads
    /// <base>/metadata/scheduledevents?api-version=2020-07-01.
    #[arg(long, env = "NODEWRIGHT_AGENT_IMDS_URL", default_value = DEFAULT_IMDS_URL)]
    pub imds_url: Url,

    /// The sandbox's per-VM metadata service: the base becomes
    /// <imds-url>/imds/subscriptions/<sub>/resourceGroups/<rg>/virtualMachines/<vm>, read from
    /// the Node's spec.providerID.
    #[arg(long, env = "NODEWRIGHT_AGENT_IMDS_URL_FROM_PROVIDER_ID")]
    pub imds_url_from_provider_id: bool,

    /// How often IMDS is polled (200ms to 60s; Azure advises about once a second).
    #[arg(long, env = "NODEWRIGHT_AGENT_POLL_INTERVAL", default_value = "1s", value_parser = poll_interval)]
    pub poll_interval: Duration,

    /// A kubeconfig file; without one the agent uses its pod's ServiceAccount (in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Log lines as text or json.
    #[arg(long, env = "NODEWRIGHT_AGENT_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

/// `--poll-interval`: a duration such as `1s` or `500ms`, within the bounds.
fn poll_interval(text: &str) -> Result<Duration, String> {
    let interval = humantime::parse_duration(text.trim())
        .map_err(|error| format!("{text} is not a duration such as 1s or 500ms: {error}"))?;
    if !(MIN_POLL_INTERVAL..=MAX_POLL_INTERVAL).contains(&interval) {
        return Err(format!(
            "{text} is outside 200ms to 60s: IMDS is polled about once a second"
        ));
    }
    Ok(interval)
}

/// `--node-name`: a Node name (1 to 253 of a-z 0-9 - .).
fn node_name(text: &str) -> Result<String, String> {
    let name = text.trim();
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if !valid {
        return Err(format!(
            "{} is not a Node name: 1 to 253 of a-z, 0-9, '-' and '.'",
            nodewright_model::text::quoted(text)
        ));
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Settings, String> {
        let mut all = vec!["nodewright-node-agent"];
        all.extend_from_slice(args);
        Settings::try_parse_from(all).map_err(|e| e.to_string())
    }

    #[test]
    fn the_defaults_read_azures_service_every_second() {
        let settings = parse(&["--node-name", "web-bcdfg"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(settings.imds_url.as_str(), "http://169.254.169.254/");
        assert_eq!(settings.poll_interval, Duration::from_secs(1));
        assert!(!settings.imds_url_from_provider_id);
        // `KUBECONFIG` is read when set (the README's test command sets it for the stack).
        assert_eq!(
            settings.kubeconfig,
            std::env::var_os("KUBECONFIG").map(PathBuf::from)
        );
    }

    #[test]
    fn the_poll_interval_is_bounded() {
        for (value, ok) in [
            ("200ms", true),
            ("60s", true),
            ("100ms", false),
            ("2m", false),
            ("x", false),
        ] {
            let result = parse(&["--node-name", "n", "--poll-interval", value]);
            assert_eq!(
                result.is_ok(),
                ok,
                "{value}: {result:?}",
                result = result.as_ref().err()
            );
        }
    }

    #[test]
    fn a_bad_node_name_is_refused() {
        let error = parse(&["--node-name", "Web_1"]).err().unwrap_or_default();
        assert!(error.contains("is not a Node name"), "{error}");
    }
}
