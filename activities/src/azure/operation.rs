//! An async operation as the rest of the code sees it: the handle a write returns (persisted in
//! Temporal history by the starting activity) and the state one poll found. Plain data, used by
//! [`super::client`] (which builds handles from a write's answer) and [`super::poll`] (which
//! polls them).

use std::time::Duration;

use chrono::{DateTime, Utc};
use nodewright_model::arm::poll_schedule::{OperationKind, next_poll};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    /// When ARM accepted the write (this worker's clock), so that a poll resumed by another
    /// attempt keeps the operation's schedule. Absent in handles recorded before it existed:
    /// they count from the first poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_at: Option<DateTime<Utc>>,
}

/// When to poll a running operation next: `poll_schedule` for its kind, following the
/// `Retry-After` of the last answer about it (the accepting write's until a poll answered).
#[derive(Debug, Clone, PartialEq)]
pub struct PollClock {
    kind: OperationKind,
    accepted_at: DateTime<Utc>,
    retry_after: Option<Duration>,
}

impl PollClock {
    /// The clock of `handle`, an operation of `kind`.
    pub fn new(kind: OperationKind, handle: &OperationHandle) -> Self {
        Self {
            kind,
            accepted_at: handle.accepted_at.unwrap_or_else(Utc::now),
            retry_after: handle.retry_after_seconds.map(Duration::from_secs),
        }
    }

    /// Takes in what a poll answered: its `Retry-After`, or its absence.
    pub fn heard(&mut self, progress: &Progress) {
        if let Progress::Running { retry_after } = progress {
            self.retry_after = *retry_after;
        }
    }

    /// How long to wait before the next poll, from now.
    pub fn next_delay(&self) -> Duration {
        self.next_delay_at(Utc::now())
    }

    /// How long to wait before the next poll, from `now`.
    pub fn next_delay_at(&self, now: DateTime<Utc>) -> Duration {
        let elapsed = (now - self.accepted_at).to_std().unwrap_or(Duration::ZERO);
        next_poll(self.kind, elapsed, self.retry_after)
    }
}

/// The state of an operation after one successful poll.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Still running: poll again when [`PollClock`] says.
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn handle(
        retry_after_seconds: Option<u64>,
        accepted_at: Option<DateTime<Utc>>,
    ) -> OperationHandle {
        OperationHandle {
            protocol: PollProtocol::AzureAsyncOperation,
            url: "https://management.azure.com/op/1?api-version=2024-07-01".to_owned(),
            retry_after_seconds,
            accepted_at,
        }
    }

    #[test]
    fn handles_round_trip_through_history_as_plain_json() {
        let accepted = DateTime::parse_from_rfc3339("2026-11-28T10:00:00Z")
            .expect("a time")
            .with_timezone(&Utc);
        let handle = handle(Some(15), Some(accepted));
        let stored = serde_json::to_value(&handle).expect("serializes");
        assert_eq!(
            stored,
            json!({
                "protocol": "azureAsyncOperation",
                "url": "https://management.azure.com/op/1?api-version=2024-07-01",
                "retryAfterSeconds": 15,
                "acceptedAt": "2026-11-28T10:00:00Z"
            })
        );
        assert_eq!(
            serde_json::from_value::<OperationHandle>(stored).expect("parses"),
            handle
        );
        let older = json!({"protocol": "location", "url": "u"});
        let older: OperationHandle = serde_json::from_value(older).expect("an older handle parses");
        assert_eq!(older.accepted_at, None);
    }

    #[test]
    fn the_clock_follows_retry_after_and_else_the_kinds_schedule() {
        let accepted = Utc::now();
        let mut clock = PollClock::new(OperationKind::VmCreate, &handle(Some(15), Some(accepted)));
        assert_eq!(clock.next_delay_at(accepted), Duration::from_secs(15));
        clock.heard(&Progress::Running { retry_after: None });
        // No Retry-After: the first poll near 80% of a create's usual 90 s.
        assert_eq!(clock.next_delay_at(accepted), Duration::from_secs(72));
        let later = accepted + chrono::Duration::seconds(100);
        assert_eq!(clock.next_delay_at(later), Duration::from_secs(10));
        clock.heard(&Progress::Running {
            retry_after: Some(Duration::from_secs(3)),
        });
        assert_eq!(clock.next_delay_at(later), Duration::from_secs(3));
        // An accepting time ahead of this clock counts as just accepted.
        let ahead = PollClock::new(
            OperationKind::Nic,
            &handle(None, Some(accepted + chrono::Duration::seconds(30))),
        );
        assert_eq!(
            ahead.next_delay_at(accepted),
            next_poll(OperationKind::Nic, Duration::ZERO, None)
        );
    }
}
