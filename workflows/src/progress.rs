//! What the machine workflows share: the workflow clock as text, step bookkeeping for the
//! `status` query, the search attributes and summary, and turning activity failures into
//! readable reasons.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use nodewright_model::machine::{MachineStatus, Outcome, Step};
use temporalio_common::protos::temporal::api::failure::v1::Failure;
use temporalio_sdk::ActivityExecutionError;
use temporalio_sdk::{ApplicationFailure, WorkflowContext, WorkflowTermination};

use crate::search;

/// A workflow whose state holds a [`MachineStatus`].
pub trait HasStatus {
    /// The status, for updates.
    fn status_mut(&mut self) -> &mut MachineStatus;
}

/// The workflow's deterministic time (the start of the current workflow task).
pub fn now<W>(ctx: &WorkflowContext<W>) -> DateTime<Utc> {
    ctx.workflow_time()
        .map(DateTime::<Utc>::from)
        .unwrap_or_default()
}

/// `t` as RFC 3339 with seconds, e.g. `2026-11-21T10:00:00Z`.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The time left until `deadline`, zero when it has passed.
pub fn left_until<W>(ctx: &WorkflowContext<W>, deadline: DateTime<Utc>) -> Duration {
    (deadline - now(ctx)).to_std().unwrap_or(Duration::ZERO)
}

/// `start + duration`, saturating at the latest instant a deadline can name
/// ([`nodewright_model::time::LATEST`]): a duration from outside never panics a workflow task.
pub fn later(start: DateTime<Utc>, duration: Duration) -> DateTime<Utc> {
    let latest = DateTime::<Utc>::from_timestamp(nodewright_model::time::LATEST, 0)
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    chrono::Duration::from_std(duration)
        .ok()
        .and_then(|d| start.checked_add_signed(d))
        .map_or(latest, |t| t.min(latest))
}

/// Marks `step` running: status, the `NodewrightPhase` attribute and the UI's details line.
pub fn begin<W: HasStatus>(ctx: &mut WorkflowContext<W>, step: Step) {
    let at = rfc3339(now(ctx));
    ctx.state_mut(|s| s.status_mut().start(step, &at));
    ctx.upsert_search_attributes([search::PHASE.value_set(step.as_str().to_owned())]);
    ctx.set_current_details(format!("step: {step}"));
}

/// Marks `step` done, with what it found.
pub fn done<W: HasStatus>(ctx: &mut WorkflowContext<W>, step: Step, detail: impl Into<String>) {
    let at = rfc3339(now(ctx));
    let detail = detail.into();
    ctx.state_mut(|s| {
        s.status_mut()
            .finish(step, &at, (!detail.is_empty()).then_some(detail))
    });
}

/// Records a warning in the status: something went wrong without failing the run.
pub fn warn<W: HasStatus>(ctx: &mut WorkflowContext<W>, warning: impl Into<String>) {
    let warning = warning.into();
    ctx.state_mut(|s| s.status_mut().warnings.push(warning));
}

/// Records a fact (vm id, node, ...) in the status.
pub fn fact<W: HasStatus>(ctx: &mut WorkflowContext<W>, key: &str, value: impl Into<String>) {
    let value = value.into();
    ctx.state_mut(|s| {
        s.status_mut().facts.insert(key.to_owned(), value);
    });
}

/// Ends a run well: outcome, `NodewrightPhase=done`, and the UI's details line.
pub fn succeed<W: HasStatus>(ctx: &mut WorkflowContext<W>, details: String) {
    ctx.state_mut(|s| s.status_mut().outcome = Outcome::Succeeded);
    ctx.upsert_search_attributes([search::PHASE.value_set("done".to_owned())]);
    ctx.set_current_details(details);
}

/// Ends a run in failure: outcome and reason in the status, `NodewrightPhase=failed`, the UI's
/// details line, and the non-retryable failure of type `type_name` the run returns.
pub fn fail<W: HasStatus>(
    ctx: &mut WorkflowContext<W>,
    type_name: &str,
    message: String,
) -> WorkflowTermination {
    ctx.state_mut(|s| {
        let status = s.status_mut();
        status.outcome = Outcome::Failed;
        status.failure = Some(message.clone());
    });
    ctx.upsert_search_attributes([search::PHASE.value_set("failed".to_owned())]);
    ctx.set_current_details(message.clone());
    let error: Box<dyn std::error::Error + Send + Sync> = message.into();
    ApplicationFailure::builder(error)
        .type_name(type_name.to_owned())
        .non_retryable(true)
        .build()
        .into()
}

/// Options of a child workflow that outlives its parent (ParentClosePolicy Abandon): its ID and
/// the summary the UI shows.
pub fn child_options(
    workflow_id: &nodewright_model::WorkflowId,
    summary: String,
) -> temporalio_sdk::ChildWorkflowOptions {
    temporalio_sdk::ChildWorkflowOptions::builder()
        .workflow_id(workflow_id.to_string())
        .parent_close_policy(temporalio_sdk::ParentClosePolicy::Abandon)
        .static_summary(summary)
        .build()
}

/// A step that ended the happy path, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFailed {
    /// The step.
    pub step: Step,
    /// Why, in ARM or Kubernetes terms.
    pub reason: String,
}

impl StepFailed {
    /// A failure of `step` for `reason`.
    pub fn new(step: Step, reason: impl Into<String>) -> Self {
        Self {
            step,
            reason: reason.into(),
        }
    }

    /// The failure of `step` an activity reported.
    pub fn from_activity(step: Step, error: &ActivityExecutionError) -> Self {
        Self::new(step, activity_failure_text(error))
    }
}

/// Marks `failed.step` failed in the status.
pub fn record_failure<W: HasStatus>(ctx: &mut WorkflowContext<W>, failed: &StepFailed) {
    let at = rfc3339(now(ctx));
    ctx.state_mut(|s| s.status_mut().fail(failed.step, &at, &failed.reason));
}

/// The messages of an activity failure and its causes, without the SDK's generic wrapper.
pub fn activity_failure_text(error: &ActivityExecutionError) -> String {
    match error.failure() {
        Some(failure) => failure_text(failure),
        None => error.to_string(),
    }
}

/// The messages of a child workflow's failure and its causes.
pub fn child_failure_text(error: &temporalio_sdk::ChildWorkflowExecutionError) -> String {
    match error.failure() {
        Some(failure) => failure_text(failure),
        None => error.to_string(),
    }
}

/// Whether a child workflow ended Canceled (its failure, or a cause of it, is a cancellation).
pub fn was_canceled(error: &temporalio_sdk::ChildWorkflowExecutionError) -> bool {
    use temporalio_common::protos::temporal::api::failure::v1::failure::FailureInfo;
    let mut next = error.failure();
    while let Some(failure) = next {
        if matches!(
            failure.failure_info,
            Some(FailureInfo::CanceledFailureInfo(_))
        ) {
            return true;
        }
        next = failure.cause.as_deref();
    }
    false
}

/// The messages of `failure` and its causes, by the one rule for an error and its causes
/// ([`nodewright_model::text::join_messages`]: joined with `: `, the SDK's generic wrapper and
/// repeats dropped), so a failure reads as the CLI and the worker's logs render the error.
fn failure_text(failure: &Failure) -> String {
    let messages =
        std::iter::successors(Some(failure), |f| f.cause.as_deref()).map(|f| f.message.as_str());
    let text = nodewright_model::text::join_messages(messages);
    if text.is_empty() {
        "the activity failed without a message".to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(message: &str, cause: Option<Failure>) -> Failure {
        Failure {
            message: message.to_owned(),
            cause: cause.map(Box::new),
            ..Failure::default()
        }
    }

    #[test]
    fn failure_text_joins_causes_and_drops_the_generic_wrapper() {
        let inner = failure("ARM operation failed: AllocationFailed: no capacity", None);
        let app = failure(
            "VM m failed to provision: AllocationFailed: no capacity",
            Some(inner),
        );
        let top = failure("Activity task failed", Some(app));
        assert_eq!(
            failure_text(&top),
            "VM m failed to provision: AllocationFailed: no capacity: ARM operation failed: AllocationFailed: no capacity"
        );
        assert_eq!(
            failure_text(&failure("", None)),
            "the activity failed without a message"
        );
    }

    /// An error whose messages are `messages`, outermost first, as a Rust error chain.
    #[derive(Debug)]
    struct Chain {
        message: &'static str,
        source: Option<Box<Chain>>,
    }

    impl std::fmt::Display for Chain {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.message)
        }
    }

    impl std::error::Error for Chain {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.source
                .as_deref()
                .map(|s| s as &(dyn std::error::Error + 'static))
        }
    }

    #[test]
    fn a_failure_reads_as_the_cli_and_the_logs_render_the_same_error() {
        let table: [&[&'static str]; 6] = [
            &["reading Node web-abcde failed"],
            &["reading Node web-abcde failed", "connection refused"],
            &["Activity task failed", "VM m failed", "AllocationFailed"],
            &["ApiError: not found", "not found"],
            &["outer", "", "  inner  "],
            &[
                "Activity task failed",
                "evicting pod shop/web-0 failed: forbidden (HTTP 403 Forbidden)",
            ],
        ];
        for messages in table {
            let mut proto: Option<Failure> = None;
            let mut error: Option<Chain> = None;
            for message in messages.iter().rev() {
                proto = Some(failure(message, proto));
                error = Some(Chain {
                    message,
                    source: error.map(Box::new),
                });
            }
            let (Some(proto), Some(error)) = (proto, error) else {
                panic!("every row has a message");
            };
            assert_eq!(
                failure_text(&proto),
                nodewright_model::text::error_chain(&error),
                "{messages:?}"
            );
        }
    }

    #[test]
    fn later_is_exact_and_saturates_at_the_latest_writable_instant() {
        let t = DateTime::parse_from_rfc3339("2026-11-21T10:00:00.5Z")
            .expect("valid")
            .with_timezone(&Utc);
        assert_eq!(
            rfc3339(later(t, Duration::from_secs(90))),
            "2026-11-21T10:01:30Z"
        );
        assert_eq!(rfc3339(later(t, Duration::MAX)), "9999-12-31T23:59:59Z");
        assert_eq!(
            rfc3339(later(t, Duration::from_secs(u64::MAX / 2))),
            "9999-12-31T23:59:59Z"
        );
    }

    #[test]
    fn times_are_rfc3339_to_the_second() {
        let t = DateTime::parse_from_rfc3339("2026-11-21T10:00:00.123Z")
            .expect("valid")
            .with_timezone(&Utc);
        assert_eq!(rfc3339(t), "2026-11-21T10:00:00Z");
    }
}

#[cfg(test)]
mod properties {
    use std::time::Duration;

    use chrono::{DateTime, Utc};
    use proptest::prelude::*;

    use super::later;

    proptest! {
        /// Any start a history can hold and any duration from outside: the sum never panics,
        /// never goes back in time, and saturates at the latest deadline.
        #[test]
        fn later_saturates_and_never_goes_back(
            start in nodewright_model::time::EARLIEST..=nodewright_model::time::LATEST,
            secs in any::<u64>(),
            nanos in 0u32..1_000_000_000,
        ) {
            let start = DateTime::<Utc>::from_timestamp(start, 0)
                .ok_or_else(|| TestCaseError::fail("start out of chrono's range"))?;
            let end = later(start, Duration::new(secs, nanos));
            prop_assert!(end >= start);
            prop_assert!(end.timestamp() <= nodewright_model::time::LATEST);
        }
    }
}
