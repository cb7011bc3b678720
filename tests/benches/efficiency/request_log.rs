//! The sandbox's request log (`GET /sandbox/requests`) as the benchmark reads it: every ARM
//! request of one subscription with its time and path, and the operation resources the polls
//! asked about.

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use nodewright_tests::Stack;
use nodewright_tests::sandbox_admin::get_json;
use serde::Deserialize;
use serde_json::Value;

/// One logged request.
#[derive(Debug, Clone, Deserialize)]
pub struct Request {
    /// When the sandbox answered it.
    pub time: DateTime<Utc>,
    /// The path, without the query.
    pub path: String,
    /// The operation as the sandbox counts it, e.g. `vm.put`, `operation.status`.
    pub operation: String,
}

/// Reads the sandbox's log of `stack`'s ARM endpoint.
pub struct RequestLog {
    http: reqwest::Client,
    stack: Stack,
}

impl RequestLog {
    /// The log of `stack`'s sandbox.
    pub fn new(stack: &Stack) -> Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(30))
                .build()?,
            stack: stack.clone(),
        })
    }

    /// The newest sequence number logged (0 when none).
    pub async fn last_seq(&self) -> Result<u64> {
        let body = self.get("/sandbox/requests", &[]).await?;
        Ok(body["requests"]
            .as_array()
            .and_then(|requests| requests.last())
            .and_then(|last| last["seq"].as_u64())
            .unwrap_or(0))
    }

    /// The requests after `since` whose path names `stack`'s subscription.
    pub async fn since(&self, since: u64) -> Result<Vec<Request>> {
        let query = [
            ("contains", self.stack.arm.subscription_id.clone()),
            ("since", since.to_string()),
        ];
        let body = self.get("/sandbox/requests", &query).await?;
        serde_json::from_value(body["requests"].clone())
            .with_context(|| format!("the request log's records: {body}"))
    }

    /// The operation resource at `path` (an `operation.status` request's path): its body with
    /// `startTime` and, once done, `endTime`.
    pub async fn operation(&self, path: &str) -> Result<Value> {
        self.get(path, &[("api-version", "2024-07-01".to_owned())])
            .await
    }

    async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value> {
        get_json(&self.http, &self.stack, path, query, "the sandbox").await
    }
}
