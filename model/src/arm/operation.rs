//! Reading the state of an ARM async operation from one poll, by either protocol ARM uses:
//! the `Azure-AsyncOperation` resource (always 200, with a `status`), or the `Location` URL
//! (202 while running, the final result when done).
//!
//! Only `Succeeded`, `Failed` and `Canceled` (compared case-insensitively) are terminal; every other `status` (`InProgress`,
//! `Running`, `Accepted`, provider-specific words) means "poll again". A poll never re-sends the
//! original request.

use serde::Deserialize;

use super::ArmFailure;

/// The state of an async operation after one poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperationState {
    /// Not finished: poll again after `Retry-After`.
    InProgress,
    /// Finished successfully; GET the resource for its final state.
    Succeeded,
    /// Finished as `Failed` or `Canceled`, with ARM's code and message.
    Failed(ArmFailure),
}

#[derive(Debug, Deserialize)]
struct OperationBody {
    status: String,
    #[serde(default)]
    error: Option<OperationError>,
}

#[derive(Debug, Deserialize)]
struct OperationError {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// The state in an `Azure-AsyncOperation` resource body. A body without a `status` is an
/// answer we cannot read: it is returned as a retryable failure (HTTP 502 semantics).
pub fn state_from_operation_body(
    body: &[u8],
    request_id: Option<&str>,
) -> Result<OperationState, ArmFailure> {
    let parsed: OperationBody = serde_json::from_slice(body).map_err(|error| ArmFailure {
        status: 502,
        code: "UnreadableOperationStatus".to_owned(),
        message: format!("the async operation resource has no readable status: {error}"),
        request_id: request_id.map(str::to_owned),
        retry_after: None,
        operation_failed: false,
    })?;
    let error = parsed.error.unwrap_or(OperationError {
        code: String::new(),
        message: String::new(),
    });
    let status = parsed.status.trim().to_ascii_lowercase();
    Ok(match status.as_str() {
        "succeeded" => OperationState::Succeeded,
        "failed" => OperationState::Failed(ArmFailure::from_operation(
            &error.code,
            &error.message,
            request_id,
        )),
        "canceled" | "cancelled" => {
            let code = if error.code.is_empty() {
                "Canceled"
            } else {
                &error.code
            };
            let message = if error.message.is_empty() {
                "the operation was canceled"
            } else {
                &error.message
            };
            OperationState::Failed(ArmFailure::from_operation(code, message, request_id))
        }
        _ => OperationState::InProgress,
    })
}

/// The state a `Location` poll's status code gives: 202 is running, 200/201/204 is done. Other
/// statuses are failures of the poll itself, for [`ArmFailure::from_response`]; `None` here.
pub fn state_from_location_poll(status: u16) -> Option<OperationState> {
    match status {
        202 => Some(OperationState::InProgress),
        200 | 201 | 204 => Some(OperationState::Succeeded),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arm::Disposition;

    fn check(body: &str, expected: Result<OperationState, &str>) {
        let got = state_from_operation_body(body.as_bytes(), Some("req-9"));
        match (got, expected) {
            (Ok(state), Ok(want)) => assert_eq!(state, want, "{body}"),
            (Err(failure), Err(code)) => {
                assert_eq!(failure.code, code, "{body}");
                assert_eq!(failure.disposition(), Disposition::Retryable);
            }
            (got, want) => panic!("{body}: got {got:?}, expected {want:?}"),
        }
    }

    fn failed(code: &str, message: &str) -> OperationState {
        OperationState::Failed(ArmFailure::from_operation(code, message, Some("req-9")))
    }

    #[test]
    fn operation_resource_statuses_map_to_states() {
        let table: [(&str, Result<OperationState, &str>); 8] = [
            (
                r#"{"name":"op","status":"InProgress","startTime":"2026-01-01T00:00:00Z"}"#,
                Ok(OperationState::InProgress),
            ),
            (r#"{"status":"Running"}"#, Ok(OperationState::InProgress)),
            (r#"{"status":"Accepted"}"#, Ok(OperationState::InProgress)),
            (
                r#"{"status":"Succeeded","endTime":"2026-01-01T00:01:00Z"}"#,
                Ok(OperationState::Succeeded),
            ),
            (
                r#"{"status":"Failed","error":{"code":"AllocationFailed","message":"no Standard_D4s_v5 capacity in zone 2"}}"#,
                Ok(failed(
                    "AllocationFailed",
                    "no Standard_D4s_v5 capacity in zone 2",
                )),
            ),
            (r#"{"status":"Failed"}"#, Ok(failed("Unknown", ""))),
            (
                r#"{"status":"Canceled"}"#,
                Ok(failed("Canceled", "the operation was canceled")),
            ),
            (
                r#"{"error":{"code":"x"}}"#,
                Err("UnreadableOperationStatus"),
            ),
        ];
        for (body, expected) in table {
            check(body, expected);
        }
    }

    #[test]
    fn a_failed_operation_stops_retries_and_says_why() {
        let Ok(OperationState::Failed(failure)) = state_from_operation_body(
            br#"{"status":"Failed","error":{"code":"QuotaExceeded","message":"Operation could not be completed as it results in exceeding approved standardDSv5Family Cores quota."}}"#,
            None,
        ) else {
            panic!("a Failed status is a failed state");
        };
        assert_eq!(failure.disposition(), Disposition::Terminal);
        assert!(
            failure
                .to_string()
                .starts_with("ARM operation failed: QuotaExceeded: Operation could not")
        );
    }

    #[test]
    fn states_are_compared_case_insensitively_and_canceled_is_final() {
        let table: [(&str, Result<OperationState, &str>); 5] = [
            (r#"{"status":"succeeded"}"#, Ok(OperationState::Succeeded)),
            (r#"{"status":"SUCCEEDED "}"#, Ok(OperationState::Succeeded)),
            (
                r#"{"status":"failed","error":{"code":"InternalExecutionError","message":"Please retry later"}}"#,
                Ok(failed("InternalExecutionError", "Please retry later")),
            ),
            (
                r#"{"status":"cancelled"}"#,
                Ok(failed("Canceled", "the operation was canceled")),
            ),
            (
                r#"{"status":"Canceled","error":{"code":"OperationPreempted","message":"preempted by a delete"}}"#,
                Ok(failed("OperationPreempted", "preempted by a delete")),
            ),
        ];
        for (body, expected) in table {
            check(body, expected);
        }
        let Ok(OperationState::Failed(canceled)) =
            state_from_operation_body(br#"{"status":"Canceled"}"#, None)
        else {
            panic!("Canceled is a terminal failure");
        };
        assert_eq!(canceled.disposition(), Disposition::Terminal);
    }

    #[test]
    fn location_polls_are_running_until_a_final_answer() {
        let table = [
            (202, Some(OperationState::InProgress)),
            (200, Some(OperationState::Succeeded)),
            (201, Some(OperationState::Succeeded)),
            (204, Some(OperationState::Succeeded)),
            (404, None),
            (429, None),
            (500, None),
        ];
        for (status, expected) in table {
            assert_eq!(state_from_location_poll(status), expected, "{status}");
        }
    }
}
