//! The operation engine behind the emulator's lock: [`Core`] (the state, the fault rules, the
//! latency) starts an operation from an [`OpSpec`] (latency drawn, faults applied, resources
//! marked busy) and advances time: due operations complete, guests finish booting, finished
//! operation records expire.

use chrono::{DateTime, Utc};

use super::completion;
use super::faults::{Concerns, FaultKind, FaultSet, Target};
use super::latency::{Latency, Step};
use super::quota::QuotaConfig;
use super::spot_prices::SpotPrices;
use super::state::{self, Action, Kind, OpError, OpStatus, Operation, State};

/// How long finished operation records stay pollable.
const OPERATION_RETENTION: chrono::Duration = chrono::Duration::hours(1);

/// How often finished operations are checked for expiry (not on every request: there may be
/// tens of thousands of them).
const EXPIRY_CHECK_INTERVAL: chrono::Duration = chrono::Duration::seconds(10);

/// Everything behind the emulator's lock.
pub(crate) struct Core {
    pub state: State,
    pub faults: FaultSet,
    pub latency: Latency,
    pub page_size: usize,
    /// How long Azure holds a VM's NICs after its failed or canceled create or its deletion.
    pub nic_reservation: chrono::Duration,
    /// When finished operations were last checked for expiry.
    pub expiry_checked: Option<DateTime<Utc>>,
    /// Quota limits and size restrictions (`PUT /sandbox/quota` replaces them).
    pub quota: QuotaConfig,
    /// The Spot prices in force (`PUT /sandbox/spot-prices` changes them).
    pub spot_prices: SpotPrices,
    /// How long before a Spot eviction its `Preempt` Scheduled Event is announced
    /// (`eviction_notice_seconds`, `PUT /sandbox/eviction-notice`).
    pub eviction_notice: chrono::Duration,
}

/// What a request starts: the description an operation record is made from.
pub(crate) struct OpSpec<'a> {
    pub name: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub vm: Option<&'a str>,
    pub kind: Kind,
    pub action: Action,
    pub resource: String,
    pub subscription: &'a str,
    pub location: String,
    pub api_version: &'a str,
    pub steps: Vec<Step>,
    pub attach: Vec<String>,
    pub detach: Vec<String>,
    pub force_detach: Vec<String>,
    pub created: Vec<String>,
    pub fingerprint: Option<String>,
}

impl Core {
    /// Starts an operation: draws its latency, applies `fail_operation`/`hang_detach` rules,
    /// marks its resources busy, and records it. `hang_detach` rules are checked only when it
    /// detaches a disk without `ForceDetach`: a force detach is never held.
    pub fn begin(&mut self, spec: OpSpec<'_>, now: DateTime<Utc>) -> Operation {
        let concerns = self
            .state
            .get(&spec.resource)
            .map(|r| Concerns::of(&r.body))
            .unwrap_or_default();
        let target = Target {
            operation: spec.name,
            method: spec.method,
            path: spec.path,
            vm: spec.vm,
            zone: concerns.zone.as_deref(),
            size: concerns.size.as_deref(),
            priority: concerns.priority.as_deref(),
        };
        let fail_with = self
            .faults
            .fire(&[FaultKind::FailOperation], target)
            .map(|r| OpError {
                code: r
                    .rule
                    .code
                    .unwrap_or_else(|| "InternalOperationError".into()),
                message: r
                    .rule
                    .message
                    .unwrap_or_else(|| "The operation failed (injected fault).".into()),
                status: r.rule.status.unwrap_or(400),
            });
        let force_detach: Vec<String> = spec
            .force_detach
            .iter()
            .filter(|f| spec.detach.iter().any(|d| state::key(d) == state::key(f)))
            .cloned()
            .collect();
        let normal_detach = spec
            .detach
            .iter()
            .any(|d| !force_detach.iter().any(|f| state::key(f) == state::key(d)));
        let hang_rule = if !normal_detach {
            None
        } else {
            self.faults
                .fire(&[FaultKind::HangDetach], target)
                .map(|r| r.id)
        };
        let duration = self.latency.sample_max(&spec.steps);
        let retry_after = self.latency.profile.retry_after(spec.kind.provider());
        let op = Operation {
            id: uuid::Uuid::new_v4().to_string(),
            name: spec.name.to_owned(),
            kind: spec.kind,
            action: spec.action,
            resource: spec.resource,
            subscription: spec.subscription.to_owned(),
            location: spec.location,
            api_version: spec.api_version.to_owned(),
            status: OpStatus::InProgress,
            start_time: now,
            end_time: None,
            due: state::after(now, duration),
            error: None,
            fail_with,
            hang_rule,
            attach: spec.attach,
            detach: spec.detach,
            force_detach,
            waits_for: Vec::new(),
            created: spec.created,
            fingerprint: spec.fingerprint,
            retry_after: retry_after.accepted,
            poll_retry_after: retry_after.running,
        };
        let touched = std::iter::once(&op.resource)
            .chain(&op.attach)
            .chain(&op.detach)
            .chain(&op.created);
        for id in touched {
            if let Some(r) = self.state.get_mut(id) {
                r.busy = Some(op.id.clone());
            }
        }
        self.state.operations.insert(op.id.clone(), op.clone());
        self.state.in_progress.insert(op.id.clone());
        op
    }

    /// Whether the operation is held: by a `hang_detach` rule that still exists, or by an
    /// operation it waits for that is still in progress.
    fn held(&self, op: &Operation) -> bool {
        op.hang_rule.is_some_and(|id| self.faults.contains(id))
            || op.waits_for.iter().any(|id| {
                self.state
                    .operations
                    .get(id)
                    .is_some_and(|o| o.status == OpStatus::InProgress)
            })
    }

    /// Completes every operation that is due and notes finished boots; true when anything
    /// changed.
    pub(super) fn advance(&mut self, now: DateTime<Utc>) -> bool {
        let mut changed = false;
        // Completing one operation can release another that waited for it: repeat until none
        // is due (each round completes at least one operation, so this ends).
        loop {
            let mut due: Vec<(DateTime<Utc>, String)> = self
                .state
                .in_progress
                .iter()
                .filter_map(|id| self.state.operations.get(id))
                .filter(|o| o.status == OpStatus::InProgress && o.due <= now && !self.held(o))
                .map(|o| (o.due, o.id.clone()))
                .collect();
            if due.is_empty() {
                break;
            }
            due.sort();
            changed = true;
            for (_, id) in due {
                let boot = self.latency.sample(Step::Boot);
                completion::complete(&mut self.state, &id, now, boot);
            }
        }
        let State {
            resources,
            operations,
            pending_boots,
            in_progress,
            ..
        } = &mut self.state;
        in_progress.retain(|id| {
            operations
                .get(id)
                .is_some_and(|o| o.status == OpStatus::InProgress)
        });
        pending_boots.retain(|k| {
            let Some(r) = resources.get_mut(k) else {
                return false;
            };
            if r.kind != Kind::Vm || r.boot_signalled {
                return false;
            }
            match r.boot_at {
                None => false,
                Some(t) if t <= now => {
                    r.boot_signalled = true;
                    changed = true;
                    false
                }
                Some(_) => true,
            }
        });
        let before = self.state.operations.len();
        if self
            .expiry_checked
            .is_none_or(|checked| now - checked >= EXPIRY_CHECK_INTERVAL)
        {
            self.expiry_checked = Some(now);
            self.state
                .operations
                .retain(|_, o| o.end_time.is_none_or(|end| now - end < OPERATION_RETENTION));
        }
        changed || before != self.state.operations.len()
    }

    /// When the next time-based transition is due.
    pub(super) fn next_deadline(&self) -> Option<DateTime<Utc>> {
        let ops = self
            .state
            .in_progress
            .iter()
            .filter_map(|id| self.state.operations.get(id))
            .filter(|o| o.status == OpStatus::InProgress && !self.held(o))
            .map(|o| o.due);
        let boots = self
            .state
            .pending_boots
            .iter()
            .filter_map(|k| self.state.resources.get(k))
            .filter(|r| !r.boot_signalled)
            .filter_map(|r| r.boot_at);
        ops.chain(boots).min()
    }
}
