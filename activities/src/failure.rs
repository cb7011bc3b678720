//! How an activity error crosses into Temporal: its type name, whether a retry can fix it, and
//! how long to wait before the next attempt.
//!
//! The SDK's blanket `From<E> for ActivityError` makes every error a retryable failure with no
//! type name, which throws the classification away; every activity goes through [`Failure`]
//! instead.

use std::time::Duration;

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
    /// The error, shown in the Temporal UI as the failure's message.
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
            ApplicationFailure::builder(failure.error)
                .type_name(failure.type_name.to_owned())
                .non_retryable(failure.retry == Retry::NonRetryable)
                .maybe_next_retry_delay(failure.retry_after)
                .build(),
        )
    }
}
