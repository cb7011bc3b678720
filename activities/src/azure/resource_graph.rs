//! Azure Resource Graph: one query over the subscription's resources, answered from Azure's
//! index in pages of up to 1000 rows (`POST /providers/Microsoft.ResourceGraph/resources`,
//! `resultFormat: objectArray`, following `$skipToken`).
//!
//! Why: a resource group's VM list pages at 50 VMs and carries no power states, so a look at a
//! 200-machine pool costs 4 requests (8 with the subscription's status list); one Resource Graph
//! query costs 1 and carries each VM's power state (`properties.extended.instanceView`). This
//! is how machine-controller-manager's and Karpenter's Azure providers list their machines.
//! The price is freshness: the index trails ARM by seconds, so a caller reads a resource it
//! expects and the index lacks with a GET before acting on its absence. Resource Graph
//! returns only the resources the caller may read; a role on the resource group is enough.
//! Its quota is per caller (15 queries per 5 s by default): over it, 429 `RateLimiting`.

use std::collections::HashSet;

use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::client::ArmClient;
use super::error::{CallError, Error, Result};

/// The api-version nodewright sends.
pub const API_VERSION: &str = "2022-10-01";

/// The most rows Resource Graph answers in one page.
pub const PAGE_ROWS: usize = 1000;

/// The most pages one query follows (a million rows): a service that hands out `$skipToken`s
/// for ever cannot hold the caller for ever.
const MAX_PAGES: usize = 1000;

/// One page of an answer.
#[derive(Debug, Deserialize)]
struct Page<T> {
    #[serde(default = "Vec::new")]
    data: Vec<T>,
    #[serde(rename = "$skipToken", default)]
    skip_token: Option<String>,
}

/// A KQL string literal of `text`: single-quoted, with backslashes and quotes escaped.
pub fn kql_string(text: &str) -> String {
    let mut literal = String::with_capacity(text.len() + 2);
    literal.push('\'');
    for c in text.chars() {
        if c == '\\' || c == '\'' {
            literal.push('\\');
        }
        literal.push(c);
    }
    literal.push('\'');
    literal
}

impl ArmClient {
    /// Runs `query` (KQL) over this client's subscription and returns every row, following
    /// `$skipToken` page after page. A token already followed ends the answer, so a service
    /// whose tokens form a cycle cannot make it loop.
    pub async fn query_resource_graph<T: DeserializeOwned>(&self, query: &str) -> Result<Vec<T>> {
        let url = self.id_url("/providers/Microsoft.ResourceGraph/resources", API_VERSION);
        let mut rows = Vec::new();
        let mut followed = HashSet::new();
        let mut skip_token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut options = json!({ "resultFormat": "objectArray", "$top": PAGE_ROWS });
            if let Some(token) = &skip_token {
                options["$skipToken"] = json!(token);
            }
            let body = json!({
                "subscriptions": [self.subscription_id()],
                "query": query,
                "options": options,
            });
            let page: Page<T> = self
                .send(Method::POST, url.clone(), Some(body))
                .await
                .and_then(|answer| answer.json())
                .map_err(Error::QueryResourceGraph)?;
            rows.extend(page.data);
            match page.skip_token.filter(|token| !token.is_empty()) {
                Some(token) if followed.insert(token.clone()) => skip_token = Some(token),
                Some(token) => {
                    tracing::warn!(%token, "Resource Graph returned a $skipToken already followed");
                    return Ok(rows);
                }
                None => return Ok(rows),
            }
        }
        Err(Error::QueryResourceGraph(CallError::TooManyPages {
            pages: MAX_PAGES,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kql_strings_escape_quotes_and_backslashes() {
        assert_eq!(kql_string("web"), "'web'");
        assert_eq!(kql_string(r"it's a\b"), r"'it\'s a\\b'");
        assert_eq!(kql_string(""), "''");
    }
}
