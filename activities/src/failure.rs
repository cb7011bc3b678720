//! How an activity error crosses into Temporal: its type name, whether a retry can fix it, and
//! how long to wait before the next attempt.
//!
//! The SDK's blanket `From<E> for ActivityError` makes every error a retryable failure with no
//! type name, which throws the classification away; every activity goes through [`Failure`]
//! instead.
//!
//! The failure's message is the error and its causes as one line
//! ([`nodewright_model::text::error_chain`]), the same text the CLI prints and the worker logs,
//! so the Temporal UI shows what the status shows.

use std::time::Duration;

use nodewright_model::text::error_chain;
use temporalio_sdk::{ApplicationFailure, activities::ActivityError};

/// Whether a retry of the same call can succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// A transient condition: IO, timeouts, throttling, conflicts, server errors.
    Retryable,
    /// Bad input, missing permission, a terminal outside state: retrying cannot help.
    NonRetryable,
}

/// A classified activity failure, built by each module's `Error::into_activity_error`.
#[derive(Debug)]
pub struct Failure<E> {
    /// The error; it and its causes, as one line, are the failure's message in the Temporal UI.
    pub error: E,
    /// The failure's type in Temporal (the error variant's name), used by retry policies.
    pub type_name: &'static str,
    /// Whether a retry can fix it.
    pub retry: Retry,
    /// The outside system's requested wait (`Retry-After`), when it gave one.
    pub retry_after: Option<Duration>,
}

impl<E: std::error::Error + Send + Sync + 'static> From<Failure<E>> for ActivityError {
    fn from(failure: Failure<E>) -> Self {
        ActivityError::application(
            ApplicationFailure::builder(error_chain(&failure.error))
                .type_name(failure.type_name.to_owned())
                .non_retryable(failure.retry == Retry::NonRetryable)
                .maybe_next_retry_delay(failure.retry_after)
                .build(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Step {
        #[error("reading Node web-abcde failed")]
        GetNode(#[source] std::io::Error),
    }

    #[test]
    fn the_failure_message_is_the_whole_chain_with_the_type_and_retry() {
        let failure = Failure {
            error: Step::GetNode(std::io::Error::other("connection refused")),
            type_name: "GetNode",
            retry: Retry::NonRetryable,
            retry_after: Some(Duration::from_secs(7)),
        };
        let ActivityError::Application(app) = ActivityError::from(failure) else {
            panic!("an application failure");
        };
        assert_eq!(
            app.to_string(),
            "reading Node web-abcde failed: connection refused"
        );
        assert_eq!(app.type_name(), Some("GetNode"));
        assert!(app.is_non_retryable());
        assert_eq!(app.next_retry_delay(), Some(Duration::from_secs(7)));
    }
}
