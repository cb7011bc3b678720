//! Reading the sandbox's admin and ARM endpoints as the benchmarks do: one GET with the stack's
//! token, the JSON body or the status and body as the error.

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::Stack;

/// GETs `path` (with `query`) on `stack`'s sandbox; `what` names it in errors.
pub async fn get_json(
    http: &reqwest::Client,
    stack: &Stack,
    path: &str,
    query: &[(&str, String)],
    what: &str,
) -> Result<Value> {
    let url = format!("{}{path}", stack.arm.endpoint.trim_end_matches('/'));
    let response = http
        .get(&url)
        .query(query)
        .bearer_auth(&stack.arm.token)
        .send()
        .await
        .with_context(|| format!("reading {what} at {url}"))?;
    let status = response.status();
    let body: Value = response.json().await?;
    if !status.is_success() {
        bail!("reading {what}: {status}: {body}");
    }
    Ok(body)
}
