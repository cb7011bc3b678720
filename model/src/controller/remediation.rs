//! Remediations in progress ([`Remediation`], carried in the controller's state) and how one
//! moves along the policy's ladder: it ends when its machine is healthy again or gone, and a rung
//! that did not bring the machine back within `remediationTimeout` gives way to the next.

use serde::{Deserialize, Serialize};

use super::health::{HealthPolicy, Rung, Verdict};
use super::machines::Machine;
use crate::time::deadline_after;

/// A remediation in progress, carried in the controller's state (and across continue-as-new).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remediation {
    /// The machine.
    pub machine: String,
    /// The rung it is on: an index into the policy's `remediation` ladder.
    pub rung: usize,
    /// When that rung started, Unix seconds.
    pub started_at: i64,
    /// Why the machine was found unhealthy when the remediation started.
    pub reason: String,
}

impl Remediation {
    /// The rung it is on; `None` when the ladder (changed since) has no such rung.
    pub fn current_rung(&self, policy: &HealthPolicy) -> Option<Rung> {
        policy.remediation.get(self.rung).copied()
    }

    /// When its rung has had its time (`started_at + remediationTimeout`), Unix seconds.
    pub fn deadline(&self, policy: &HealthPolicy) -> i64 {
        deadline_after(self.started_at, policy.remediation_timeout)
    }

    /// Whether nothing more will be tried: its last rung (a restart or redeploy) had its time,
    /// or the ladder no longer has its rung. A replacement is never exhausted: it ends when the
    /// machine is gone.
    pub fn is_exhausted(&self, policy: &HealthPolicy, now: i64) -> bool {
        match self.current_rung(policy) {
            None => true,
            Some(Rung::Replace) => false,
            Some(_) => self.rung + 1 >= policy.remediation.len() && now >= self.deadline(policy),
        }
    }
}

/// What carrying the remediations on at one decision asks for.
#[derive(Debug, Default)]
pub(super) struct CarriedOn {
    /// The remediations that go on (the new state).
    pub(super) kept: Vec<Remediation>,
    /// Rungs to act on now: (machine, rung).
    pub(super) actions: Vec<(String, Rung)>,
    /// When a rung's time ends, the earliest after `now`.
    pub(super) deadlines: Vec<i64>,
}

/// Carries `remediations` on at `now`, each machine judged by `verdict_of`:
/// - its machine gone (no VM, Node nor work): it ends; healthy again: it ends, but a restart or
///   redeploy is kept until its rung's window (`remediationTimeout`) is over, so that a machine
///   failing again inside it goes on to the next rung rather than starting the ladder over;
/// - its machine being deleted (its replacement, or any delete): it goes on unchanged until the
///   machine is gone, and still counts as in flight;
/// - on `replace`, with remediation `allowed` and the machine not yet being deleted: the delete
///   is asked for again (children are idempotent by machine name);
/// - on `restart` or `redeploy` past `remediationTimeout` and still not healthy: with `allowed`
///   and no work in flight on the machine (the restart itself), the next rung starts now (a new
///   action); otherwise, or past the last rung, it stays.
pub(super) fn carry_on<'a>(
    remediations: &[Remediation],
    machine_of: impl Fn(&str) -> Option<&'a Machine>,
    verdict_of: impl Fn(&str) -> Option<&'a Verdict>,
    policy: &HealthPolicy,
    allowed: bool,
    now: i64,
) -> CarriedOn {
    let mut carried = CarriedOn::default();
    for remediation in remediations {
        let Some(machine) = machine_of(&remediation.machine) else {
            continue;
        };
        if machine.is_deleting() {
            carried.kept.push(remediation.clone());
            continue;
        }
        if matches!(verdict_of(&machine.name), Some(Verdict::Healthy) | None) {
            // A restart or redeploy has its whole window: a machine that comes back and fails
            // again inside it (a deadlock that survives a reboot) goes on up the ladder instead
            // of starting it over; healthy at the window's end, the remediation ends.
            let rung = remediation.current_rung(policy);
            let deadline = remediation.deadline(policy);
            if matches!(rung, Some(Rung::Restart | Rung::Redeploy)) && now < deadline {
                carried.deadlines.push(deadline);
                carried.kept.push(remediation.clone());
            }
            continue;
        }
        match remediation.current_rung(policy) {
            None => carried.kept.push(remediation.clone()),
            Some(Rung::Replace) => {
                if allowed {
                    carried
                        .actions
                        .push((remediation.machine.clone(), Rung::Replace));
                }
                carried.kept.push(remediation.clone());
            }
            Some(_) => {
                let deadline = remediation.deadline(policy);
                let next = policy.remediation.get(remediation.rung + 1).copied();
                match next {
                    Some(next) if now >= deadline && allowed && machine.work.is_none() => {
                        carried.actions.push((remediation.machine.clone(), next));
                        carried.kept.push(Remediation {
                            rung: remediation.rung + 1,
                            started_at: now,
                            ..remediation.clone()
                        });
                        if next != Rung::Replace {
                            carried
                                .deadlines
                                .push(deadline_after(now, policy.remediation_timeout));
                        }
                    }
                    _ => {
                        if now < deadline {
                            carried.deadlines.push(deadline);
                        }
                        carried.kept.push(remediation.clone());
                    }
                }
            }
        }
    }
    carried
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn policy(ladder: &[Rung]) -> HealthPolicy {
        HealthPolicy {
            remediation: ladder.to_vec(),
            remediation_timeout: Duration::from_secs(600),
            ..HealthPolicy::default()
        }
    }

    fn on(rung: usize, started_at: i64) -> Remediation {
        Remediation {
            machine: "p-a".to_owned(),
            rung,
            started_at,
            reason: "Ready=False for 5m".to_owned(),
        }
    }

    #[test]
    fn a_restart_or_redeploy_is_exhausted_only_on_the_last_rung_past_its_time() {
        let ladder = policy(&[Rung::Restart, Rung::Redeploy]);
        let table = [
            // (rung, started_at, now, exhausted)
            (0, 1_000, 5_000, false),
            (1, 1_000, 1_599, false),
            (1, 1_000, 1_600, true),
            (2, 1_000, 1_000, true),
        ];
        for (rung, started_at, now, exhausted) in table {
            assert_eq!(
                on(rung, started_at).is_exhausted(&ladder, now),
                exhausted,
                "rung {rung} from {started_at} at {now}"
            );
        }
        assert!(!on(0, 0).is_exhausted(&policy(&[Rung::Replace]), i64::MAX));
    }

    #[test]
    fn a_machine_healthy_again_keeps_its_rung_until_the_window_ends_then_the_remediation_ends() {
        let ladder = policy(&[Rung::Restart, Rung::Replace]);
        let machine = crate::controller::test_support::ready("p-a", "t", 100);
        let healthy = Verdict::Healthy;
        let carried = |now: i64| {
            carry_on(
                &[on(0, 1_000)],
                |_| Some(&machine),
                |_| Some(&healthy),
                &ladder,
                true,
                now,
            )
        };
        // Inside the restart's window: kept (no new action), looked at again at its end.
        let inside = carried(1_300);
        assert_eq!(inside.kept, [on(0, 1_000)]);
        assert!(inside.actions.is_empty());
        assert_eq!(inside.deadlines, [1_600]);
        // At the window's end, healthy: it ends.
        let after = carried(1_600);
        assert!(after.kept.is_empty() && after.actions.is_empty());
        // Unhealthy again at the window's end: the next rung, not the first one again.
        let sick = Verdict::Unhealthy {
            reason: "KernelDeadlock=True".to_owned(),
            since: 1_500,
        };
        let again = carry_on(
            &[on(0, 1_000)],
            |_| Some(&machine),
            |_| Some(&sick),
            &ladder,
            true,
            1_600,
        );
        assert_eq!(again.actions, [("p-a".to_owned(), Rung::Replace)]);
        assert_eq!(again.kept.first().map(|r| r.rung), Some(1));
    }
}
