//! The emulator's one error enum; its `IntoResponse` renders ARM's error body
//! `{"error":{"code","message","target"?,"details"?}}` with the headers Azure sends alongside.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Everything the emulator answers with a non-2xx status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArmError {
    /// 400 `MissingApiVersionParameter`.
    #[error("The api-version query parameter (?api-version=) is required for all requests.")]
    MissingApiVersion,
    /// 400 `InvalidApiVersionParameter`.
    #[error("The api-version '{version}' is invalid. The supported versions are '{supported}'.")]
    InvalidApiVersion {
        /// The version the client sent.
        version: String,
        /// The supported versions, newest first, comma-separated without spaces (as ARM lists
        /// them).
        supported: String,
    },
    /// 401 `AuthenticationFailed`.
    #[error(
        "Authentication failed. The 'Authorization' header is missing or carries an invalid bearer token."
    )]
    AuthenticationFailed,
    /// 404 `ResourceNotFound`.
    #[error("The Resource '{0}' was not found.")]
    ResourceNotFound(String),
    /// 404 `NotFound` for a path the emulator does not serve.
    #[error("No route for {0}.")]
    NoRoute(String),
    /// 400 `InvalidParameter`, naming the offending field.
    #[error("{message}")]
    InvalidParameter {
        /// The field, e.g. `properties.hardwareProfile.vmSize`.
        target: String,
        /// What is wrong with it.
        message: String,
    },
    /// 400 `InvalidRequestContent`: the body is not the JSON ARM expects.
    #[error("The request content was invalid and could not be deserialized: {0}")]
    InvalidRequestContent(String),
    /// 409 `AnotherOperationInProgress`: the resource is busy with another operation (retryable).
    #[error(
        "Operation is not allowed since another operation is in progress on the resource '{0}'."
    )]
    Busy(String),
    /// 409 `OperationNotAllowed`: the disk is attached to another VM.
    #[error("Disk {disk} is already attached to VM {managed_by}.")]
    AttachedElsewhere {
        /// The disk's name.
        disk: String,
        /// The id of the VM holding it.
        managed_by: String,
    },
    /// 412 `PreconditionFailed`: `If-Match`/`If-None-Match` did not hold.
    #[error("The condition specified using HTTP conditional header(s) is not met.")]
    PreconditionFailed,
    /// 429 throttling from a fault rule.
    #[error("The request is being throttled.")]
    Throttled {
        /// Seconds for `Retry-After`.
        retry_after: u64,
        /// Whether the network provider answers (code `RetryableErrorDueToAnotherOperation`).
        network: bool,
    },
    /// Any other refusal with an explicit status and ARM code (conflicts, NicInUse, injected 5xx).
    #[error("{message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// ARM error code.
        code: String,
        /// ARM error message.
        message: String,
    },
    /// A refusal with an explicit status and ARM code that names its `target` (e.g.
    /// `PlatformImageNotFound` on `imageReference`).
    #[error("{message}")]
    RejectedAt {
        /// HTTP status.
        status: u16,
        /// ARM error code.
        code: String,
        /// The field the error is about.
        target: String,
        /// ARM error message.
        message: String,
    },
}

impl ArmError {
    /// A refusal with this status, code and message.
    pub fn rejected(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self::Rejected {
            status,
            code: code.to_owned(),
            message: message.into(),
        }
    }

    /// A refusal with this status, code, target and message.
    pub fn rejected_at(status: u16, code: &str, target: &str, message: impl Into<String>) -> Self {
        Self::RejectedAt {
            status,
            code: code.to_owned(),
            target: target.to_owned(),
            message: message.into(),
        }
    }

    /// 400 `NicReservedForAnotherVm`, in Azure's words: the NIC is held for the VM `vm` (its
    /// failed or canceled create, or its deletion) for `window_seconds`.
    pub fn nic_reserved(vm: &str, window_seconds: i64) -> Self {
        Self::rejected(
            400,
            "NicReservedForAnotherVm",
            format!(
                "Nic(s) in request is reserved for another Virtual Machine for {window_seconds} seconds. Please provide another nic(s) or retry after {window_seconds} seconds. Reserved VM: {vm}"
            ),
        )
    }

    /// A 400 `InvalidParameter` for `target`.
    pub fn invalid(target: &str, message: impl Into<String>) -> Self {
        Self::InvalidParameter {
            target: target.to_owned(),
            message: message.into(),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        let code = match self {
            Self::MissingApiVersion
            | Self::InvalidApiVersion { .. }
            | Self::InvalidParameter { .. }
            | Self::InvalidRequestContent(_) => 400,
            Self::AuthenticationFailed => 401,
            Self::ResourceNotFound(_) | Self::NoRoute(_) => 404,
            Self::Busy(_) | Self::AttachedElsewhere { .. } => 409,
            Self::PreconditionFailed => 412,
            Self::Throttled { .. } => 429,
            Self::Rejected { status, .. } | Self::RejectedAt { status, .. } => *status,
        };
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The ARM error code.
    pub fn code(&self) -> &str {
        match self {
            Self::MissingApiVersion => "MissingApiVersionParameter",
            Self::InvalidApiVersion { .. } => "InvalidApiVersionParameter",
            Self::AuthenticationFailed => "AuthenticationFailed",
            Self::ResourceNotFound(_) => "ResourceNotFound",
            Self::NoRoute(_) => "NotFound",
            Self::InvalidParameter { .. } => "InvalidParameter",
            Self::InvalidRequestContent(_) => "InvalidRequestContent",
            Self::Busy(_) => "AnotherOperationInProgress",
            Self::AttachedElsewhere { .. } => "OperationNotAllowed",
            Self::PreconditionFailed => "PreconditionFailed",
            Self::Throttled { network: true, .. } => "RetryableErrorDueToAnotherOperation",
            Self::Throttled { network: false, .. } => "OperationNotAllowed",
            Self::Rejected { code, .. } | Self::RejectedAt { code, .. } => code,
        }
    }
}

impl IntoResponse for ArmError {
    fn into_response(self) -> Response {
        let mut error = json!({ "code": self.code(), "message": self.to_string() });
        if let Self::InvalidParameter { target, .. } | Self::RejectedAt { target, .. } = &self {
            error["target"] = json!(target);
        }
        if let Self::Throttled { network: false, .. } = &self {
            error["details"] = json!([{
                "code": "TooManyRequests",
                "target": "HighCostGet",
                "message": "The request is throttled: too many requests.",
            }]);
        }
        let mut response = (self.status(), axum::Json(json!({ "error": error }))).into_response();
        let headers = response.headers_mut();
        if let Ok(code) = HeaderValue::from_str(self.code()) {
            headers.insert("x-ms-error-code", code);
        }
        if let Self::Throttled { retry_after, .. } = &self {
            headers.insert("retry-after", HeaderValue::from(*retry_after));
            headers.insert(
                "x-ms-ratelimit-remaining-resource",
                HeaderValue::from_static("Microsoft.Compute/HighCostGet;0"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_uses_a_code_the_client_retries() {
        assert_eq!(
            ArmError::Busy("x".into()).code(),
            "AnotherOperationInProgress"
        );
        assert_eq!(ArmError::Busy("x".into()).status(), StatusCode::CONFLICT);
    }
}
