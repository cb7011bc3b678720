//! Async operations: one poll of the handle a write returns ([`super::operation`]), and a
//! bounded wait for tools and tests.
//!
//! A poll GETs the handle's URL and never re-sends the original request. The state is read by
//! `nodewright_model::arm` (`Azure-AsyncOperation`: the `status` field; `Location`: 202 while
//! running, the final result when done).

use std::time::{Duration, Instant};

use nodewright_model::arm::poll_schedule::OperationKind;
use nodewright_model::arm::{
    OperationState, parse_retry_after, state_from_location_poll, state_from_operation_body,
};
use reqwest::Method;
use serde_json::Value;

use super::client::{ArmClient, RETRY_AFTER_HEADER};
use super::error::{CallError, Error, Result};
use super::operation::{OperationHandle, PollClock, PollProtocol, Progress};

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

    /// Polls `handle`, an operation of `kind`, until it finishes, for at most `max_wait`;
    /// [`PollClock`] says when (`Retry-After` when ARM sends it, else the kind's schedule). For
    /// short operations inside one activity attempt (a NIC, a disk's tags) and for tools: the
    /// long waits of a VM poll with heartbeats, so that a worker restart loses nothing.
    pub async fn wait(
        &self,
        handle: &OperationHandle,
        kind: OperationKind,
        max_wait: Duration,
    ) -> Result<Option<Value>> {
        let started = Instant::now();
        let mut clock = PollClock::new(kind, handle);
        loop {
            let delay = clock.next_delay();
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
                running => clock.heard(&running),
            }
        }
    }
}
