//! An async operation as the rest of the code sees it: the handle a write returns (persisted in
//! Temporal history by the starting activity) and the state one poll found. Plain data, used by
//! [`super::client`] (which builds handles from a write's answer) and [`super::poll`] (which
//! polls them).

use std::time::Duration;

use nodewright_model::arm::DEFAULT_RETRY_AFTER;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which of ARM's two polling protocols a handle uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PollProtocol {
    /// `Azure-AsyncOperation`: an operation resource, always 200, with a `status`.
    AzureAsyncOperation,
    /// `Location`: 202 while running, then the final answer (200 with a body, or 204).
    Location,
}

/// A running ARM operation: what to poll and how long ARM asked to wait first. Serializable, so
/// the activity that starts an operation can return it into workflow history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationHandle {
    /// The polling protocol.
    pub protocol: PollProtocol,
    /// The absolute polling URL (on the ARM endpoint).
    pub url: String,
    /// The `Retry-After` of the answer that started the operation, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}

impl OperationHandle {
    /// How long to wait before the first poll: `Retry-After`, else ARM's default of 60 s.
    pub fn first_delay(&self) -> Duration {
        self.retry_after_seconds
            .map_or(DEFAULT_RETRY_AFTER, Duration::from_secs)
    }
}

/// The state of an operation after one successful poll.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Still running: poll again after `retry_after` (ARM's default 60 s when `None`).
    Running {
        /// The poll answer's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// Finished successfully. For `Location` operations, `result` is the final body when there
    /// was one; for `Azure-AsyncOperation` GET the resource for its final state.
    Succeeded {
        /// The final body of a `Location` poll.
        result: Option<Value>,
    },
}

impl Progress {
    /// The wait before the next poll: `Retry-After`, else ARM's default of 60 s.
    pub fn delay(&self) -> Option<Duration> {
        match self {
            Progress::Running { retry_after } => Some(retry_after.unwrap_or(DEFAULT_RETRY_AFTER)),
            Progress::Succeeded { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn handles_round_trip_through_history_as_plain_json() {
        let handle = OperationHandle {
            protocol: PollProtocol::AzureAsyncOperation,
            url: "https://management.azure.com/op/1?api-version=2024-07-01".to_owned(),
            retry_after_seconds: Some(15),
        };
        let stored = serde_json::to_value(&handle).expect("serializes");
        assert_eq!(
            stored,
            json!({
                "protocol": "azureAsyncOperation",
                "url": "https://management.azure.com/op/1?api-version=2024-07-01",
                "retryAfterSeconds": 15
            })
        );
        assert_eq!(
            serde_json::from_value::<OperationHandle>(stored).expect("parses"),
            handle
        );
        assert_eq!(handle.first_delay(), Duration::from_secs(15));
    }

    #[test]
    fn without_retry_after_the_rpc_default_applies() {
        let handle = OperationHandle {
            protocol: PollProtocol::Location,
            url: "u".to_owned(),
            retry_after_seconds: None,
        };
        assert_eq!(handle.first_delay(), DEFAULT_RETRY_AFTER);
        let running = Progress::Running { retry_after: None };
        assert_eq!(running.delay(), Some(DEFAULT_RETRY_AFTER));
    }
}
