//! Errors of the Kubernetes activities, named after the step that failed.
//!
//! Retryable: transport errors, 408, 409 (conflict), 429 and 5xx answers. Every other API answer
//! (400, 401, 403, 404 on a read, 422) is not, because a retry would get the same answer.

use crate::failure::{Failure, Retry};
use temporalio_sdk::activities::ActivityError;

/// An error from a Kubernetes activity.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading `/version` failed.
    #[error("reading the Kubernetes apiserver version failed")]
    GetVersion(#[source] kube::Error),
    /// Listing nodes failed.
    #[error("listing Kubernetes nodes failed")]
    ListNodes(#[source] kube::Error),
    /// Reading one Node failed.
    #[error("reading Node {name} failed")]
    GetNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Applying labels and taints (server-side apply) failed.
    #[error("applying labels and taints to Node {name} failed")]
    ApplyNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Cordoning failed.
    #[error("cordoning Node {name} failed")]
    CordonNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Deleting the Node object failed.
    #[error("deleting Node {name} failed")]
    DeleteNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A Node of that name exists for another machine.
    #[error(
        "Node {name} exists with providerID {found:?}, not {expected:?}: another machine uses the name; nodewright does not touch it"
    )]
    ForeignNode {
        /// The Node.
        name: String,
        /// Its providerID.
        found: Option<String>,
        /// The VM's providerID.
        expected: String,
    },
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The variant's name, used as the failure type in Temporal.
    fn type_name(&self) -> &'static str {
        match self {
            Error::GetVersion(_) => "GetVersion",
            Error::ListNodes(_) => "ListNodes",
            Error::GetNode { .. } => "GetNode",
            Error::ApplyNode { .. } => "ApplyNode",
            Error::CordonNode { .. } => "CordonNode",
            Error::DeleteNode { .. } => "DeleteNode",
            Error::ForeignNode { .. } => "ForeignNode",
        }
    }

    fn source_error(&self) -> Option<&kube::Error> {
        match self {
            Error::GetVersion(source) | Error::ListNodes(source) => Some(source),
            Error::GetNode { source, .. }
            | Error::ApplyNode { source, .. }
            | Error::CordonNode { source, .. }
            | Error::DeleteNode { source, .. } => Some(source),
            Error::ForeignNode { .. } => None,
        }
    }

    /// Classifies the error and turns it into the activity's failure.
    pub fn into_activity_error(self) -> ActivityError {
        let retry = self.source_error().map_or(Retry::NonRetryable, retry_for);
        Failure {
            type_name: self.type_name(),
            retry,
            retry_after: None,
            error: self,
        }
        .into()
    }
}

/// Whether a retry can fix a failed Kubernetes call.
fn retry_for(error: &kube::Error) -> Retry {
    match error {
        kube::Error::Api(status) => retry_for_status(status.code),
        _ => Retry::Retryable,
    }
}

fn retry_for_status(code: u16) -> Retry {
    match code {
        408 | 409 | 429 | 500..=599 => Retry::Retryable,
        _ => Retry::NonRetryable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_answers_are_classified_by_status_code() {
        let table = [
            (400, Retry::NonRetryable),
            (401, Retry::NonRetryable),
            (403, Retry::NonRetryable),
            (404, Retry::NonRetryable),
            (408, Retry::Retryable),
            (409, Retry::Retryable),
            (422, Retry::NonRetryable),
            (429, Retry::Retryable),
            (500, Retry::Retryable),
            (503, Retry::Retryable),
        ];
        for (code, expected) in table {
            assert_eq!(retry_for_status(code), expected, "HTTP {code}");
        }
    }

    #[test]
    fn every_variant_is_named_after_its_step() {
        let forbidden = || {
            kube::Error::Api(Box::new(kube::core::Status {
                code: 403,
                ..Default::default()
            }))
        };
        let table = [
            (Error::GetVersion(forbidden()), "GetVersion"),
            (Error::ListNodes(forbidden()), "ListNodes"),
        ];
        for (error, expected) in table {
            assert_eq!(error.type_name(), expected);
            assert_eq!(
                error.source_error().map(retry_for),
                Some(Retry::NonRetryable)
            );
        }
    }
}
