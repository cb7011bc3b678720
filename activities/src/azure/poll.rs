//! Async operations: the handle a write returns (persisted in Temporal history by the starting
//! activity), one poll of it, and a bounded wait for tools and tests.
//!
//! A poll GETs the handle's URL and never re-sends the original request. The state is read by
//! `nodewright_model::arm` (`Azure-AsyncOperation`: the `status` field; `Location`: 202 while
//! running, the final result when done).

use std::time::{Duration, Instant};

use nodewright_model::arm::{
    DEFAULT_RETRY_AFTER, OperationState, parse_retry_after, state_from_location_poll,
    state_from_operation_body,
};
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::client::{ArmClient, RETRY_AFTER_HEADER};
use super::error::{CallError, Error, Result};

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

impl ArmClient {
    /// Polls `handle` once. An operation that ended `Failed` or `Canceled` is
    /// [`Error::OperationFailed`] (terminal, with ARM's code and message); a failed poll is
    /// [`Error::PollOperation`], classified like any call.
    pub async fn poll_once(&self, handle: &OperationHandle) -> Result<Progress> {
        let poll_failed = |source| Error::PollOperation {
            url: handle.url.clone(),
            source,
        };
        let url = self.returned_url(&handle.url).map_err(poll_failed)?;
        let answer = self
            .send(Method::GET, url, None)
            .await
            .map_err(poll_failed)?;
        let retry_after = answer
            .header(RETRY_AFTER_HEADER)
            .and_then(parse_retry_after);
        let state = match handle.protocol {
            PollProtocol::AzureAsyncOperation => {
                let request_id = answer.request_id();
                state_from_operation_body(&answer.body, request_id.as_deref())
                    .map_err(|failure| poll_failed(CallError::Arm(failure)))?
            }
            // `send` only returns 2xx; a 2xx other than 200/201/202/204 still means "done".
            PollProtocol::Location => {
                state_from_location_poll(answer.status).unwrap_or(OperationState::Succeeded)
            }
        };
        match state {
            OperationState::InProgress => Ok(Progress::Running { retry_after }),
            OperationState::Succeeded => {
                let result = match handle.protocol {
                    PollProtocol::AzureAsyncOperation => None,
                    PollProtocol::Location => answer.json_if_any().map_err(poll_failed)?,
                };
                Ok(Progress::Succeeded { result })
            }
            OperationState::Failed(failure) => Err(Error::OperationFailed {
                url: handle.url.clone(),
                source: failure,
            }),
        }
    }

    /// Polls `handle` until it finishes, sleeping `Retry-After` (else 60 s) before each poll,
    /// for at most `max_wait`. For tools and tests: activities poll once per attempt or
    /// heartbeat instead, so that a worker restart loses nothing.
    pub async fn wait(
        &self,
        handle: &OperationHandle,
        max_wait: Duration,
    ) -> Result<Option<Value>> {
        let started = Instant::now();
        let mut delay = handle.first_delay();
        loop {
            // Saturating: a `Retry-After` near `u64::MAX` seconds must time out, not overflow.
            if started.elapsed().saturating_add(delay) > max_wait {
                return Err(Error::WaitTimedOut {
                    url: handle.url.clone(),
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(delay).await;
            match self.poll_once(handle).await? {
                Progress::Succeeded { result } => return Ok(result),
                running => delay = running.delay().unwrap_or(DEFAULT_RETRY_AFTER),
            }
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
