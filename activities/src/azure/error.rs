//! Errors of the ARM client, named after the step that failed, classified as architecture §5
//! says.
//!
//! Every step variant carries a [`CallError`]: an ARM answer ([`ArmFailure`]: status, code,
//! message, request id, `Retry-After`), a transport failure, a token failure, or a body that
//! did not decode.

use std::time::Duration;

use nodewright_model::arm::{ArmFailure, Disposition};
use temporalio_sdk::activities::ActivityError;

use crate::failure::{Failure, Retry};

/// Why one HTTP exchange with ARM failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// ARM answered with a non-2xx status, or an operation ended `Failed`/`Canceled`.
    #[error(transparent)]
    Arm(ArmFailure),
    /// Connecting, sending, or reading the answer failed (including the request timeout).
    #[error("the HTTP exchange with ARM failed")]
    Transport(#[source] reqwest::Error),
    /// No bearer token could be obtained.
    #[error("getting an ARM access token failed")]
    Token(#[source] azure_core::Error),
    /// The answer was 2xx but its body is not the JSON expected.
    #[error(
        "the ARM answer ({}) is not the expected JSON",
        request_id.as_deref().map_or_else(|| "no request id".to_owned(), |id| format!("request id {id}"))
    )]
    Decode {
        /// `x-ms-request-id` of the answer.
        request_id: Option<String>,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
    /// A request body did not serialize to JSON.
    #[error("the ARM request body does not serialize to JSON")]
    Encode(#[source] serde_json::Error),
    /// A URL ARM returned (`nextLink`, a polling URL) is not a URL of the configured endpoint;
    /// the client does not send its token there.
    #[error("refusing to call {url}: it is not on the configured ARM endpoint")]
    ForeignUrl {
        /// The URL.
        url: String,
    },
    /// A paged answer went on past the most pages a caller follows; a partial list is never
    /// returned (a missing resource would read as gone).
    #[error("the answer went on past {pages} pages; refusing to read a partial list")]
    TooManyPages {
        /// The pages followed.
        pages: usize,
    },
}

impl CallError {
    /// Retry, stop, or gone. Transport and token failures are retryable (outages of ARM or
    /// Entra are transient; a misconfiguration still ends when the activity's retry policy
    /// does); bodies that do not decode or encode, and foreign URLs, are not.
    pub fn disposition(&self) -> Disposition {
        match self {
            CallError::Arm(failure) => failure.disposition(),
            CallError::Transport(error) if error.is_builder() => Disposition::Terminal,
            CallError::Transport(_) | CallError::Token(_) => Disposition::Retryable,
            CallError::Decode { .. }
            | CallError::Encode(_)
            | CallError::ForeignUrl { .. }
            | CallError::TooManyPages { .. } => Disposition::Terminal,
        }
    }

    /// The ARM failure, when ARM answered.
    pub fn arm_failure(&self) -> Option<&ArmFailure> {
        match self {
            CallError::Arm(failure) => Some(failure),
            _ => None,
        }
    }

    /// ARM's `Retry-After`, when it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        self.arm_failure().and_then(|failure| failure.retry_after)
    }
}

/// An error of the ARM client.
///
/// Retryable (see [`Error::disposition`]): transport errors and timeouts, token failures,
/// ARM 408, 412, 429 and 5xx, and 409 "another operation in progress", honouring `Retry-After`;
/// [`Error::WaitTimedOut`]. Not retryable: other 4xx, undecodable bodies, configuration errors
/// ([`Error::InvalidEndpoint`], [`Error::BuildHttpClient`], [`Error::CreateCredential`]) and
/// [`Error::OperationFailed`]. A 404 is [`Disposition::Gone`]: deletes turn it into success
/// before it becomes an error; for reads the caller decides.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ARM endpoint is not an `http(s)` base URL.
    #[error("the ARM endpoint {endpoint} is not an http(s) base URL")]
    InvalidEndpoint {
        /// The configured endpoint.
        endpoint: String,
    },
    /// Building the HTTP client failed.
    #[error("building the ARM HTTP client failed")]
    BuildHttpClient(#[source] reqwest::Error),
    /// Building the configured token credential failed.
    #[error("building the Azure token credential failed")]
    CreateCredential(#[source] azure_core::Error),
    /// Reading a VM failed.
    #[error("getting VM {name} failed")]
    GetVm {
        /// The VM name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Listing the resource group's VMs failed.
    #[error("listing VMs failed")]
    ListVms(#[source] CallError),
    /// A query of Azure Resource Graph failed.
    #[error("querying Azure Resource Graph failed")]
    QueryResourceGraph(#[source] CallError),
    /// Reading what a create needs room in (a subnet's usages, the compute quotas, the SKUs)
    /// failed.
    #[error("reading {what} failed")]
    ReadCapacity {
        /// What was read (`the usages of virtual network vnet`).
        what: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Listing an image's versions failed.
    #[error("listing the versions of {image} failed")]
    ListImageVersions {
        /// The image (`gallery image /subscriptions/…`).
        image: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Starting a VM action (`restart`, `redeploy`) failed.
    #[error("{action} of VM {name} failed")]
    VmAction {
        /// The VM name.
        name: String,
        /// The action.
        action: &'static str,
        /// Why (boxed: the variant would make every `Result` of the client larger).
        #[source]
        source: Box<CallError>,
    },
    /// Creating or replacing a VM failed.
    #[error("putting VM {name} failed")]
    PutVm {
        /// The VM name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Updating a VM failed.
    #[error("patching VM {name} failed")]
    PatchVm {
        /// The VM name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Deleting a VM failed.
    #[error("deleting VM {name} failed")]
    DeleteVm {
        /// The VM name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Attaching or detaching data disks failed.
    #[error("attaching or detaching data disks of VM {name} failed")]
    AttachDetachDataDisks {
        /// The VM name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Reading a NIC failed.
    #[error("getting network interface {name} failed")]
    GetNic {
        /// The NIC name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Listing the resource group's NICs failed.
    #[error("listing network interfaces failed")]
    ListNics(#[source] CallError),
    /// Creating or replacing a NIC failed.
    #[error("putting network interface {name} failed")]
    PutNic {
        /// The NIC name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Deleting a NIC failed.
    #[error("deleting network interface {name} failed")]
    DeleteNic {
        /// The NIC name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Reading a managed disk failed.
    #[error("getting disk {name} failed")]
    GetDisk {
        /// The disk name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Listing the resource group's managed disks failed.
    #[error("listing disks failed")]
    ListDisks(#[source] CallError),
    /// Creating or replacing a managed disk failed.
    #[error("putting disk {name} failed")]
    PutDisk {
        /// The disk name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Setting a managed disk's tags (PATCH) failed.
    #[error("patching the tags of disk {name} failed")]
    PatchDisk {
        /// The disk name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Deleting a managed disk failed.
    #[error("deleting disk {name} failed")]
    DeleteDisk {
        /// The disk name.
        name: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// Polling an async operation failed (the poll itself, not the operation).
    #[error("polling the ARM operation {url} failed")]
    PollOperation {
        /// The polling URL.
        url: String,
        /// Why.
        #[source]
        source: CallError,
    },
    /// The async operation ended `Failed` or `Canceled`; the source has ARM's code and message.
    #[error("the ARM operation {url} ended unsuccessfully")]
    OperationFailed {
        /// The polling URL.
        url: String,
        /// ARM's code and message.
        #[source]
        source: ArmFailure,
    },
    /// [`ArmClient::wait`](crate::azure::ArmClient::wait) gave up before the operation finished.
    #[error(
        "the ARM operation {url} did not finish within {}",
        nodewright_model::text::duration(*waited)
    )]
    WaitTimedOut {
        /// The polling URL.
        url: String,
        /// How long it waited.
        waited: Duration,
    },
}

/// The result type of the ARM client.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The failed call, for the variants that made one.
    pub fn call_error(&self) -> Option<&CallError> {
        match self {
            Error::ListVms(source)
            | Error::QueryResourceGraph(source)
            | Error::ListNics(source)
            | Error::ListDisks(source) => Some(source),
            Error::GetVm { source, .. }
            | Error::PutVm { source, .. }
            | Error::PatchVm { source, .. }
            | Error::DeleteVm { source, .. }
            | Error::AttachDetachDataDisks { source, .. }
            | Error::GetNic { source, .. }
            | Error::PutNic { source, .. }
            | Error::DeleteNic { source, .. }
            | Error::GetDisk { source, .. }
            | Error::PutDisk { source, .. }
            | Error::PatchDisk { source, .. }
            | Error::DeleteDisk { source, .. }
            | Error::PollOperation { source, .. }
            | Error::ReadCapacity { source, .. }
            | Error::ListImageVersions { source, .. } => Some(source),
            Error::VmAction { source, .. } => Some(source.as_ref()),
            Error::InvalidEndpoint { .. }
            | Error::BuildHttpClient(_)
            | Error::CreateCredential(_)
            | Error::OperationFailed { .. }
            | Error::WaitTimedOut { .. } => None,
        }
    }

    /// The ARM failure (status, code, message, request id, `Retry-After`), when ARM answered.
    pub fn arm_failure(&self) -> Option<&ArmFailure> {
        match self {
            Error::OperationFailed { source, .. } => Some(source),
            other => other.call_error().and_then(CallError::arm_failure),
        }
    }

    /// Whether a retry can help, or the resource is gone.
    pub fn disposition(&self) -> Disposition {
        match self {
            Error::InvalidEndpoint { .. }
            | Error::BuildHttpClient(_)
            | Error::CreateCredential(_) => Disposition::Terminal,
            Error::OperationFailed { source, .. } => source.disposition(),
            Error::WaitTimedOut { .. } => Disposition::Retryable,
            other => other
                .call_error()
                .map_or(Disposition::Terminal, CallError::disposition),
        }
    }

    /// ARM's `Retry-After`, when it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        self.arm_failure().and_then(|failure| failure.retry_after)
    }

    /// The variant's name, used as the failure type in Temporal.
    pub fn type_name(&self) -> &'static str {
        match self {
            Error::InvalidEndpoint { .. } => "InvalidEndpoint",
            Error::BuildHttpClient(_) => "BuildHttpClient",
            Error::CreateCredential(_) => "CreateCredential",
            Error::GetVm { .. } => "GetVm",
            Error::ListVms(_) => "ListVms",
            Error::QueryResourceGraph(_) => "QueryResourceGraph",
            Error::ReadCapacity { .. } => "ReadCapacity",
            Error::ListImageVersions { .. } => "ListImageVersions",
            Error::PutVm { .. } => "PutVm",
            Error::VmAction { .. } => "VmAction",
            Error::PatchVm { .. } => "PatchVm",
            Error::DeleteVm { .. } => "DeleteVm",
            Error::AttachDetachDataDisks { .. } => "AttachDetachDataDisks",
            Error::GetNic { .. } => "GetNic",
            Error::ListNics(_) => "ListNics",
            Error::PutNic { .. } => "PutNic",
            Error::DeleteNic { .. } => "DeleteNic",
            Error::GetDisk { .. } => "GetDisk",
            Error::ListDisks(_) => "ListDisks",
            Error::PutDisk { .. } => "PutDisk",
            Error::PatchDisk { .. } => "PatchDisk",
            Error::DeleteDisk { .. } => "DeleteDisk",
            Error::PollOperation { .. } => "PollOperation",
            Error::OperationFailed { .. } => "OperationFailed",
            Error::WaitTimedOut { .. } => "WaitTimedOut",
        }
    }

    /// Classifies the error and turns it into the activity's failure: the variant name as the
    /// type, non-retryable unless [`Disposition::Retryable`] (a `Gone` that reaches the boundary
    /// is an absent resource the activity did not expect), `Retry-After` as the next delay.
    pub fn into_activity_error(self) -> ActivityError {
        self.into_failure().into()
    }

    fn into_failure(self) -> Failure<Error> {
        let retry = match self.disposition() {
            Disposition::Retryable => Retry::Retryable,
            Disposition::Terminal | Disposition::Gone => Retry::NonRetryable,
        };
        Failure {
            type_name: self.type_name(),
            retry,
            retry_after: self.retry_after(),
            error: self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(status: u16, code: &str, retry_after: Option<&str>) -> CallError {
        let body = format!(r#"{{"error":{{"code":"{code}","message":"m"}}}}"#);
        CallError::Arm(ArmFailure::from_response(
            status,
            None,
            Some("req-1"),
            retry_after,
            body.as_bytes(),
        ))
    }

    fn every_variant() -> Vec<(Error, &'static str, Retry, Option<Duration>)> {
        let name = || "vm-1".to_owned();
        let url = || "http://arm/op".to_owned();
        let throttled = || arm(429, "TooManyRequests", Some("7"));
        let seven = Some(Duration::from_secs(7));
        vec![
            (
                Error::InvalidEndpoint {
                    endpoint: "x".to_owned(),
                },
                "InvalidEndpoint",
                Retry::NonRetryable,
                None,
            ),
            (
                Error::CreateCredential(azure_core::Error::with_message(
                    azure_core::error::ErrorKind::Credential,
                    "no env",
                )),
                "CreateCredential",
                Retry::NonRetryable,
                None,
            ),
            (
                Error::GetVm {
                    name: name(),
                    source: arm(404, "ResourceNotFound", None),
                },
                "GetVm",
                Retry::NonRetryable,
                None,
            ),
            (
                Error::ListVms(arm(503, "ServiceUnavailable", Some("7"))),
                "ListVms",
                Retry::Retryable,
                seven,
            ),
            (
                Error::PutVm {
                    name: name(),
                    source: arm(409, "AnotherOperationInProgress", None),
                },
                "PutVm",
                Retry::Retryable,
                None,
            ),
            (
                Error::PatchVm {
                    name: name(),
                    source: arm(400, "InvalidParameter", None),
                },
                "PatchVm",
                Retry::NonRetryable,
                None,
            ),
            (
                Error::DeleteVm {
                    name: name(),
                    source: throttled(),
                },
                "DeleteVm",
                Retry::Retryable,
                seven,
            ),
            (
                Error::AttachDetachDataDisks {
                    name: name(),
                    source: arm(409, "OperationNotAllowed", None),
                },
                "AttachDetachDataDisks",
                Retry::NonRetryable,
                None,
            ),
            (
                Error::GetNic {
                    name: name(),
                    source: CallError::Token(azure_core::Error::with_message(
                        azure_core::error::ErrorKind::Credential,
                        "imds down",
                    )),
                },
                "GetNic",
                Retry::Retryable,
                None,
            ),
            (
                Error::ListNics(CallError::ForeignUrl { url: url() }),
                "ListNics",
                Retry::NonRetryable,
                None,
            ),
            (
                Error::PutNic {
                    name: name(),
                    source: throttled(),
                },
                "PutNic",
                Retry::Retryable,
                seven,
            ),
            (
                Error::DeleteNic {
                    name: name(),
                    source: arm(500, "InternalServerError", None),
                },
                "DeleteNic",
                Retry::Retryable,
                None,
            ),
            (
                Error::GetDisk {
                    name: name(),
                    source: CallError::Decode {
                        request_id: None,
                        source: serde_json::from_str::<u8>("x").unwrap_err(),
                    },
                },
                "GetDisk",
                Retry::NonRetryable,
                None,
            ),
            (
                Error::ListDisks(arm(403, "AuthorizationFailed", None)),
                "ListDisks",
                Retry::NonRetryable,
                None,
            ),
            (
                Error::PutDisk {
                    name: name(),
                    source: throttled(),
                },
                "PutDisk",
                Retry::Retryable,
                seven,
            ),
            (
                Error::PatchDisk {
                    name: name(),
                    source: arm(403, "AuthorizationFailed", None),
                },
                "PatchDisk",
                Retry::NonRetryable,
                None,
            ),
            (
                Error::DeleteDisk {
                    name: name(),
                    source: arm(409, "OperationNotAllowed", None),
                },
                "DeleteDisk",
                Retry::NonRetryable,
                None,
            ),
            (
                Error::PollOperation {
                    url: url(),
                    source: arm(502, "BadGateway", Some("7")),
                },
                "PollOperation",
                Retry::Retryable,
                seven,
            ),
            (
                Error::OperationFailed {
                    url: url(),
                    source: ArmFailure::from_operation("AllocationFailed", "no capacity", None),
                },
                "OperationFailed",
                Retry::NonRetryable,
                None,
            ),
            (
                Error::WaitTimedOut {
                    url: url(),
                    waited: Duration::from_secs(1),
                },
                "WaitTimedOut",
                Retry::Retryable,
                None,
            ),
        ]
    }

    #[test]
    fn every_variant_crosses_the_activity_boundary_with_its_name_retry_and_delay() {
        // BuildHttpClient needs a reqwest::Error, which only a failed build gives.
        let mut checked = vec!["BuildHttpClient"];
        for (error, type_name, retry, retry_after) in every_variant() {
            let failure = error.into_failure();
            assert_eq!(failure.type_name, type_name);
            assert_eq!(failure.retry, retry, "{type_name}");
            assert_eq!(failure.retry_after, retry_after, "{type_name}");
            // The conversion itself must not panic or lose the error.
            let _activity_error: ActivityError = failure.into();
            checked.push(type_name);
        }
        assert_eq!(checked.len(), 21, "one row per variant: {checked:?}");
    }

    #[test]
    fn the_arm_failure_is_reachable_from_the_error() {
        let error = Error::DeleteVm {
            name: "vm-1".to_owned(),
            source: arm(429, "TooManyRequests", Some("3")),
        };
        let failure = error.arm_failure().expect("ARM answered");
        assert_eq!(
            (
                failure.status,
                failure.code.as_str(),
                failure.message.as_str()
            ),
            (429, "TooManyRequests", "m")
        );
        assert_eq!(failure.request_id.as_deref(), Some("req-1"));
        assert_eq!(error.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(error.to_string(), "deleting VM vm-1 failed");
        let cause = std::error::Error::source(&error).map(ToString::to_string);
        assert_eq!(
            cause.as_deref(),
            Some("ARM 429 TooManyRequests: m (request id req-1)")
        );
    }
}
