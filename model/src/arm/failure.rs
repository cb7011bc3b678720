//! What an Azure Resource Manager failure means for a retrying caller (architecture §5).
//!
//! The ARM client builds an [`ArmFailure`] from every non-2xx answer (status, error body, request
//! id, `Retry-After`); [`ArmFailure::disposition`] decides whether Temporal should retry, give up,
//! or treat the resource as already gone. Pure: no HTTP types, so the table below is the contract.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

/// The wait ARM's RPC prescribes when an async answer carries no `Retry-After`.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(60);

/// 409 codes that mean "another operation holds the resource": retry once it has finished.
const BUSY_CONFLICT_CODES: [&str; 5] = [
    "AnotherOperationInProgress",
    "Conflict",
    "OperationPreempted",
    "RetryableError",
    "RetryableErrorDueToAnotherOperation",
];

/// Error codes with which an async operation that ended `Failed` (or a 400/409 answer) asks to
/// be sent again: Azure's transient internal failures, a write preempted by another, and a NIC
/// still reserved for a VM being created or deleted (Azure holds it about 180 s). Compared
/// case-insensitively.
const RETRYABLE_OPERATION_CODES: [&str; 12] = [
    "AnotherOperationInProgress",
    "GatewayTimeout",
    "InternalExecutionError",
    "InternalOperationError",
    "InternalServerError",
    "NicReservedForAnotherVm",
    "OperationPreempted",
    "RetryableError",
    "RetryableErrorDueToAnotherOperation",
    "ServerTimeout",
    "ServiceUnavailable",
    "TooManyRequests",
];

/// Whether an operation that ended `Failed` with `code` is worth sending again (its write
/// re-issued), or a retry gets the same answer. `Canceled` without a retryable code is final.
pub fn operation_code_disposition(code: &str) -> Disposition {
    let code = code.trim();
    if RETRYABLE_OPERATION_CODES
        .iter()
        .any(|retryable| retryable.eq_ignore_ascii_case(code))
    {
        Disposition::Retryable
    } else {
        Disposition::Terminal
    }
}

/// What a caller does with a failed ARM call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Transient (throttling, server error, busy resource, timeout): retry, after `Retry-After`.
    Retryable,
    /// A retry gets the same answer (bad request, no permission, quota, allocation, a conflict
    /// that needs another step first): stop and report the ARM code and message.
    Terminal,
    /// The resource does not exist: success for a delete, "absent" for a read.
    Gone,
}

/// A non-2xx answer from ARM, or an async operation that ended `Failed`/`Canceled`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArmFailure {
    /// HTTP status; 200 for an operation resource whose `status` is `Failed`.
    pub status: u16,
    /// ARM error code (`error.code`, else the `x-ms-error-code` header), or `Unknown`.
    pub code: String,
    /// ARM error message, or the start of a non-ARM body.
    pub message: String,
    /// `x-ms-request-id`, for Azure support.
    pub request_id: Option<String>,
    /// `Retry-After`, when given.
    pub retry_after: Option<Duration>,
    /// Whether this is the terminal state of an async operation rather than an HTTP error.
    pub operation_failed: bool,
}

/// ARM's error body: `{"error": {"code", "message", ...}}`.
#[derive(Debug, Deserialize)]
struct ErrorEnvelope {
    error: ErrorBody,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// Longest slice of a non-ARM body kept as the message.
const MAX_RAW_MESSAGE: usize = 300;

impl ArmFailure {
    /// Builds the failure of an HTTP answer from its status, `x-ms-error-code`, `x-ms-request-id`
    /// and `Retry-After` headers, and body. Bodies that are not ARM errors are kept, shortened,
    /// as the message.
    pub fn from_response(
        status: u16,
        error_code_header: Option<&str>,
        request_id: Option<&str>,
        retry_after_header: Option<&str>,
        body: &[u8],
    ) -> Self {
        let (code, message) = match serde_json::from_slice::<ErrorEnvelope>(body) {
            Ok(envelope) => (envelope.error.code, envelope.error.message),
            Err(_) => (String::new(), raw_message(body)),
        };
        let code = [code.as_str(), error_code_header.unwrap_or_default()]
            .into_iter()
            .find(|c| !c.trim().is_empty())
            .unwrap_or("Unknown")
            .to_owned();
        Self {
            status,
            code,
            message,
            request_id: request_id.map(str::to_owned),
            retry_after: retry_after_header.and_then(parse_retry_after),
            operation_failed: false,
        }
    }

    /// The failure of an async operation that ended `Failed` or `Canceled` with `error`.
    pub fn from_operation(code: &str, message: &str, request_id: Option<&str>) -> Self {
        Self {
            status: 200,
            code: if code.is_empty() { "Unknown" } else { code }.to_owned(),
            message: message.to_owned(),
            request_id: request_id.map(str::to_owned),
            retry_after: None,
            operation_failed: true,
        }
    }

    /// Whether to retry, stop, or treat the resource as gone.
    pub fn disposition(&self) -> Disposition {
        if self.operation_failed {
            return operation_code_disposition(&self.code);
        }
        match self.status {
            404 => Disposition::Gone,
            408 | 412 | 429 | 500..=599 => Disposition::Retryable,
            409 if BUSY_CONFLICT_CODES.contains(&self.code.as_str()) => Disposition::Retryable,
            // A NIC held ~180 s after a failed create or a VM delete: delete again later.
            400 if self.code.eq_ignore_ascii_case("NicReservedForAnotherVm") => {
                Disposition::Retryable
            }
            _ => Disposition::Terminal,
        }
    }
}

impl fmt::Display for ArmFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operation_failed {
            write!(f, "ARM operation failed: {}: {}", self.code, self.message)?;
        } else {
            write!(f, "ARM {} {}: {}", self.status, self.code, self.message)?;
        }
        if let Some(id) = &self.request_id {
            write!(f, " (request id {id})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ArmFailure {}

/// The longest wait a `Retry-After` may ask for: ARM's throttling windows are minutes; a larger
/// value is a broken proxy or an attacker's header, and is waited this long instead.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(15 * 60);

/// Parses `Retry-After` as ARM sends it: whole seconds, at most [`MAX_RETRY_AFTER`]. HTTP dates
/// and garbage give `None`.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .map(|seconds| Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

fn raw_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(MAX_RAW_MESSAGE) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn failure(status: u16, code: &str) -> ArmFailure {
        let body = format!(r#"{{"error":{{"code":"{code}","message":"m"}}}}"#);
        ArmFailure::from_response(status, None, None, None, body.as_bytes())
    }

    #[test]
    fn answers_are_classified_as_architecture_section_5_says() {
        let table = [
            (400, "InvalidParameter", Disposition::Terminal),
            (400, "MissingApiVersionParameter", Disposition::Terminal),
            (401, "AuthenticationFailed", Disposition::Terminal),
            (403, "AuthorizationFailed", Disposition::Terminal),
            (404, "ResourceNotFound", Disposition::Gone),
            (404, "NotFound", Disposition::Gone),
            (408, "RequestTimeout", Disposition::Retryable),
            (409, "AnotherOperationInProgress", Disposition::Retryable),
            (409, "OperationPreempted", Disposition::Retryable),
            (
                409,
                "RetryableErrorDueToAnotherOperation",
                Disposition::Retryable,
            ),
            // Deleting an attached disk: only detaching first helps, not a retry.
            (409, "OperationNotAllowed", Disposition::Terminal),
            (409, "PropertyChangeNotAllowed", Disposition::Terminal),
            // An ETag mismatch: the activity re-reads before it writes again.
            (412, "PreconditionFailed", Disposition::Retryable),
            (429, "OperationNotAllowed", Disposition::Retryable),
            (429, "TooManyRequests", Disposition::Retryable),
            (500, "InternalServerError", Disposition::Retryable),
            (503, "ServiceUnavailable", Disposition::Retryable),
        ];
        for (status, code, expected) in table {
            assert_eq!(
                failure(status, code).disposition(),
                expected,
                "{status} {code}"
            );
        }
    }

    #[test]
    fn failed_operations_are_terminal_with_their_code() {
        for code in [
            "AllocationFailed",
            "QuotaExceeded",
            "OSProvisioningTimedOut",
        ] {
            let failed = ArmFailure::from_operation(code, "no capacity", Some("req-1"));
            assert_eq!(failed.disposition(), Disposition::Terminal, "{code}");
            assert_eq!(
                failed.to_string(),
                format!("ARM operation failed: {code}: no capacity (request id req-1)")
            );
        }
    }

    #[test]
    fn failed_operations_are_classified_by_their_code() {
        let table = [
            ("InternalExecutionError", Disposition::Retryable),
            ("internalexecutionerror", Disposition::Retryable),
            ("InternalOperationError", Disposition::Retryable),
            ("OperationPreempted", Disposition::Retryable),
            ("RetryableError", Disposition::Retryable),
            (
                "RetryableErrorDueToAnotherOperation",
                Disposition::Retryable,
            ),
            ("AnotherOperationInProgress", Disposition::Retryable),
            ("NicReservedForAnotherVm", Disposition::Retryable),
            ("InternalServerError", Disposition::Retryable),
            ("ServiceUnavailable", Disposition::Retryable),
            ("GatewayTimeout", Disposition::Retryable),
            ("ServerTimeout", Disposition::Retryable),
            ("TooManyRequests", Disposition::Retryable),
            ("AllocationFailed", Disposition::Terminal),
            ("ZonalAllocationFailed", Disposition::Terminal),
            ("QuotaExceeded", Disposition::Terminal),
            ("OperationNotAllowed", Disposition::Terminal),
            ("Canceled", Disposition::Terminal),
            ("Unknown", Disposition::Terminal),
        ];
        for (code, expected) in table {
            assert_eq!(operation_code_disposition(code), expected, "{code}");
            let failed = ArmFailure::from_operation(code, "m", None);
            assert_eq!(failed.disposition(), expected, "operation {code}");
        }
    }

    #[test]
    fn a_nic_reserved_for_another_vm_is_deleted_again_later() {
        assert_eq!(
            failure(400, "NicReservedForAnotherVm").disposition(),
            Disposition::Retryable
        );
        assert_eq!(
            failure(400, "InvalidParameter").disposition(),
            Disposition::Terminal
        );
    }

    #[test]
    fn the_message_names_status_code_message_and_request_id() {
        let throttled = ArmFailure::from_response(
            429,
            None,
            Some("0f3c"),
            Some("17"),
            br#"{"error":{"code":"OperationNotAllowed","message":"The server rejected the request because too many requests have been received for this subscription.","details":[{"code":"TooManyRequests"}]}}"#,
        );
        assert_eq!(throttled.retry_after, Some(Duration::from_secs(17)));
        assert_eq!(
            throttled.to_string(),
            "ARM 429 OperationNotAllowed: The server rejected the request because too many requests have been received for this subscription. (request id 0f3c)"
        );
    }

    #[test]
    fn bodies_that_are_not_arm_errors_still_give_a_code_and_message() {
        let gateway = ArmFailure::from_response(502, None, None, None, b"<html>Bad Gateway</html>");
        assert_eq!(
            (gateway.code.as_str(), gateway.message.as_str()),
            ("Unknown", "<html>Bad Gateway</html>")
        );
        let from_header =
            ArmFailure::from_response(409, Some("AnotherOperationInProgress"), None, None, b"");
        assert_eq!(from_header.code, "AnotherOperationInProgress");
        assert_eq!(from_header.disposition(), Disposition::Retryable);
        let long = vec![b'x'; 1000];
        let shortened = ArmFailure::from_response(500, None, None, None, &long);
        assert_eq!(shortened.message.chars().count(), MAX_RAW_MESSAGE + 1);
    }

    #[test]
    fn retry_after_is_whole_seconds() {
        let table = [
            ("0", Some(0)),
            ("30", Some(30)),
            ("900", Some(900)),
            ("901", Some(900)),
            ("18446744073709551615", Some(900)),
            ("18446744073709551616", None),
            (" 5 ", Some(5)),
            ("Wed, 21 Oct 2015 07:28:00 GMT", None),
            ("-1", None),
            ("1.5", None),
            ("", None),
        ];
        for (value, expected) in table {
            assert_eq!(
                parse_retry_after(value),
                expected.map(Duration::from_secs),
                "{value:?}"
            );
        }
    }

    proptest! {
        /// No header makes a step wait longer than [`MAX_RETRY_AFTER`].
        #[test]
        fn retry_after_is_bounded(value in ".*", seconds in any::<u64>()) {
            for value in [value, seconds.to_string()] {
                if let Some(wait) = parse_retry_after(&value) {
                    prop_assert!(wait <= MAX_RETRY_AFTER);
                }
            }
        }

        #[test]
        fn client_errors_are_never_retried_unless_listed(status in 400u16..500, code in "[A-Za-z]{0,30}") {
            let disposition = failure(status, &code).disposition();
            let listed = matches!(status, 404 | 408 | 412 | 429)
                || (status == 409 && BUSY_CONFLICT_CODES.contains(&code.as_str()));
            prop_assert_eq!(disposition == Disposition::Terminal, !listed);
        }

        #[test]
        fn server_errors_are_always_retried(status in 500u16..600, code in "[A-Za-z]{0,30}") {
            prop_assert_eq!(failure(status, &code).disposition(), Disposition::Retryable);
        }
    }
}
