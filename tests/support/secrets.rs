//! Looking for a secret where it must never be: in a run's history (its payloads are base64 JSON,
//! so every string is searched as written and decoded), a log or a CLI's output.

use anyhow::{Context, Result, ensure};
use base64::Engine;
use serde_json::Value;

use crate::Stack;
use crate::machines::{CliResult, cli_with_env};
use crate::stack::history_json;

/// The checks every secrets scenario ends with: `secret` is in no CLI output, not in the
/// worker's log (which is shown to be captured), and in no history of the pools' runs. Each
/// test keeps its own further assertions on the runs [`SecretScan::assert_nowhere`] returns.
pub struct SecretScan<'a> {
    /// The stack the runs are listed and read from.
    pub stack: &'a Stack,
    /// The task queue the CLI uses.
    pub task_queue: &'a str,
    /// Variables set for the CLI that lists the runs (e.g. the codec keys).
    pub env: &'a [(&'a str, &'a str)],
    /// The text that must be nowhere.
    pub secret: &'a str,
    /// How failure messages name the secret (e.g. "the bootstrap token"): never its text.
    pub named: &'a str,
    /// Each CLI command run (without `nodewright`) and what it printed.
    pub outputs: &'a [(String, CliResult)],
    /// The worker's whole log.
    pub worker_log: &'a str,
    /// Texts the worker's log must hold, which show it is captured.
    pub log_shows: &'a [&'a str],
    /// The failure message when the log lacks one of `log_shows`.
    pub log_not_captured: &'a str,
    /// The pools whose runs (`nodewright --output json runs --pool POOL`) are scanned.
    pub pools: &'a [&'a str],
}

/// One run the scan read.
pub struct ScannedRun {
    /// Its workflow ID.
    pub id: String,
    /// Its history as JSON.
    pub history: Value,
}

impl SecretScan<'_> {
    /// Fails naming what leaked where (never the secret itself); otherwise returns every run of
    /// the pools with its history.
    pub async fn assert_nowhere(&self) -> Result<Vec<ScannedRun>> {
        let named = self.named;
        for (command, output) in self.outputs {
            ensure!(
                !output.stdout.contains(self.secret) && !output.stderr.contains(self.secret),
                "`nodewright {command}` printed {named}"
            );
        }
        ensure!(
            !self.worker_log.contains(self.secret),
            "the worker logged {named}"
        );
        ensure!(
            self.log_shows
                .iter()
                .all(|text| self.worker_log.contains(text)),
            "{}",
            self.log_not_captured
        );
        let mut ids = Vec::new();
        for pool in self.pools {
            let args = ["--output", "json", "runs", "--pool", pool];
            let runs = cli_with_env(self.stack, self.task_queue, &args, self.env).await?;
            runs.expect_code(0)?;
            ids.extend(
                runs.json()?
                    .as_array()
                    .context("runs --output json is a list")?
                    .iter()
                    .filter_map(|run| run["workflowId"].as_str().map(str::to_owned)),
            );
        }
        let mut scanned = Vec::new();
        for id in ids {
            let history = history_json(self.stack, &id).await?;
            let leaks = json_mentions(&history, self.secret);
            ensure!(
                leaks.is_empty(),
                "{id}'s history holds {named} at {leaks:?}"
            );
            scanned.push(ScannedRun { id, history });
        }
        Ok(scanned)
    }
}

/// Where `needle` occurs in `value`: the JSON path of each string that holds it, as written or
/// base64-decoded (how Temporal's JSON carries payload data).
pub fn json_mentions(value: &Value, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    walk(value, "$", needle, &mut found);
    found
}

fn walk(value: &Value, path: &str, needle: &str, found: &mut Vec<String>) {
    match value {
        Value::String(text) => {
            if text.contains(needle) || decoded(text).is_some_and(|d| d.contains(needle)) {
                found.push(path.to_owned());
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                walk(item, &format!("{path}[{index}]"), needle, found);
            }
        }
        Value::Object(fields) => {
            for (name, field) in fields {
                walk(field, &format!("{path}.{name}"), needle, found);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// `text` base64-decoded, as lossy UTF-8, when it is base64.
fn decoded(text: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_needle_is_found_as_written_and_inside_base64_payload_data() {
        let secret = "abcdef.0123456789abcdef";
        let data = base64::engine::general_purpose::STANDARD.encode(format!(
            r#"{{"bootstrap":"kubeadm join --token {secret}"}}"#
        ));
        let history = json!({
            "events": [
                { "input": { "payloads": [{ "metadata": { "encoding": "anNvbi9wbGFpbg==" }, "data": data }] } },
                { "failure": { "message": format!("failed near {secret}") } },
                { "result": { "payloads": [{ "data": "eyJvayI6dHJ1ZX0=" }] } },
            ]
        });
        assert_eq!(
            json_mentions(&history, secret),
            [
                "$.events[0].input.payloads[0].data",
                "$.events[1].failure.message"
            ]
        );
        assert!(json_mentions(&history, "not-there").is_empty());
    }
}
