//! What the sweep does with its plan once it is classified and braked: finish, report a dry
//! run, wait for a person's approval, or act; and what a wait that ends without an approval
//! comes to.
//!
//! The order of the questions is the safety: nothing planned ends the run, a dry run never
//! acts, and a braked plan or one over `max_deletions` waits for an approval naming the run
//! before anything is removed.

use std::time::Duration;

use super::audit::SweepOutcome;
use super::brake::Brake;
use super::classify::human;
use super::request::SweepPhase;

/// The sweep's next step after planning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanStep {
    /// Nothing to remove: the audit is the result.
    Finish,
    /// A dry run: every removal is recorded as planned, nothing is done.
    DryRun,
    /// The brake holds the plan, or it removes more than `max_deletions`: wait for approval.
    AwaitApproval,
    /// Remove what the plan says.
    Act,
}

/// The next step for a plan of `planned` removals.
pub fn decide_plan_step(planned: u32, dry_run: bool, braked: bool, max_deletions: u32) -> PlanStep {
    if planned == 0 {
        PlanStep::Finish
    } else if dry_run {
        PlanStep::DryRun
    } else if braked || planned > max_deletions {
        PlanStep::AwaitApproval
    } else {
        PlanStep::Act
    }
}

/// While waiting for approval: the phase (`braked` when the brake holds the plan, else
/// `awaiting-approval`) and why, for people.
pub fn approval_wait(
    brake: Option<&Brake>,
    planned: u32,
    max_deletions: u32,
) -> (SweepPhase, String) {
    match brake {
        Some(brake) => (
            SweepPhase::Braked,
            format!("braked ({}): {}", brake.reason.as_str(), brake.message),
        ),
        None => (
            SweepPhase::AwaitingApproval,
            format!("{planned} removals planned, more than max_deletions {max_deletions}"),
        ),
    }
}

/// A wait of `wait` that ended without an approval: how the sweep ends, and why every planned
/// removal is skipped.
pub fn not_approved(
    brake: Option<&Brake>,
    planned: u32,
    max_deletions: u32,
    wait: Duration,
) -> (SweepOutcome, String) {
    let wait = human(wait);
    match brake {
        Some(brake) => (
            SweepOutcome::Braked {
                reason: brake.message.clone(),
            },
            format!(
                "braked ({}) and not approved within {wait}",
                brake.reason.as_str()
            ),
        ),
        None => (
            SweepOutcome::NotApproved {
                planned,
                max_deletions,
            },
            format!(
                "not approved within {wait} ({planned} removals, max_deletions {max_deletions})"
            ),
        ),
    }
}

/// The Kubernetes API's health check: `Ok` when it is healthy, else the reason to freeze.
pub fn api_verdict(healthy: bool, detail: &str) -> Result<(), String> {
    if healthy {
        Ok(())
    } else {
        Err(format!("the Kubernetes API is not healthy: {detail}"))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::sweep::{BrakeCounts, BrakeReason};

    fn check(planned: u32, dry_run: bool, braked: bool, max: u32, expected: PlanStep) {
        assert_eq!(
            decide_plan_step(planned, dry_run, braked, max),
            expected,
            "planned {planned}, dry run {dry_run}, braked {braked}, max_deletions {max}"
        );
    }

    #[test]
    fn plan_steps_follow_the_table() {
        use PlanStep::*;
        let table = [
            // planned, dry run, braked, max_deletions, step
            (0, false, false, 10, Finish),
            (0, true, true, 0, Finish),
            (3, true, false, 10, DryRun),
            (30, true, true, 10, DryRun),
            (3, false, true, 10, AwaitApproval),
            (11, false, false, 10, AwaitApproval),
            (1, false, false, 0, AwaitApproval),
            (10, false, false, 10, Act),
            (1, false, false, 10, Act),
        ];
        for (planned, dry_run, braked, max, step) in table {
            check(planned, dry_run, braked, max, step);
        }
    }

    proptest! {
        #[test]
        fn acts_only_on_a_real_plan_within_the_cap_and_unbraked(
            planned in 0u32..100,
            dry_run: bool,
            braked: bool,
            max in 0u32..100,
        ) {
            let step = decide_plan_step(planned, dry_run, braked, max);
            let may_act = planned > 0 && !dry_run && !braked && planned <= max;
            prop_assert_eq!(step == PlanStep::Act, may_act);
            if dry_run && planned > 0 {
                prop_assert_eq!(step, PlanStep::DryRun);
            }
        }
    }

    fn brake() -> Brake {
        Brake {
            reason: BrakeReason::NoNodeMatched,
            message: "3 VMs of this cluster, none with a Node".to_owned(),
            counts: BrakeCounts::default(),
        }
    }

    #[test]
    fn a_braked_plan_waits_as_braked_and_ends_braked() {
        let brake = brake();
        assert_eq!(
            approval_wait(Some(&brake), 3, 10),
            (
                SweepPhase::Braked,
                "braked (no-node-matched): 3 VMs of this cluster, none with a Node".to_owned()
            )
        );
        assert_eq!(
            not_approved(Some(&brake), 3, 10, Duration::from_secs(3600)),
            (
                SweepOutcome::Braked {
                    reason: brake.message.clone()
                },
                "braked (no-node-matched) and not approved within 1h".to_owned()
            )
        );
    }

    #[test]
    fn a_plan_over_the_cap_waits_for_approval_and_ends_not_approved() {
        assert_eq!(
            approval_wait(None, 12, 10),
            (
                SweepPhase::AwaitingApproval,
                "12 removals planned, more than max_deletions 10".to_owned()
            )
        );
        assert_eq!(
            not_approved(None, 12, 10, Duration::from_secs(90)),
            (
                SweepOutcome::NotApproved {
                    planned: 12,
                    max_deletions: 10
                },
                "not approved within 1m 30s (12 removals, max_deletions 10)".to_owned()
            )
        );
    }

    #[test]
    fn the_mode_and_the_width_come_from_the_request() {
        let cluster = crate::ClusterName::parse("cluster", "prod").expect("a valid cluster name");
        let table = [
            (true, true, 0, "dry run", 1),
            (true, false, 5, "dry run", 5),
            (false, true, 1, "remediating", 1),
            (false, false, 50, "deleting orphans", 50),
        ];
        for (dry_run, remediate, parallelism, mode, width) in table {
            let request = crate::sweep::SweepRequest {
                dry_run,
                remediate,
                parallelism,
                ..crate::sweep::SweepRequest::new(cluster.clone())
            };
            assert_eq!(request.mode(), mode);
            assert_eq!(
                request.removals_at_once(),
                width,
                "parallelism {parallelism}"
            );
        }
    }

    #[test]
    fn an_unhealthy_api_freezes_with_its_detail() {
        assert_eq!(api_verdict(true, "/readyz ok"), Ok(()));
        assert_eq!(
            api_verdict(false, "/readyz failed: refused"),
            Err("the Kubernetes API is not healthy: /readyz failed: refused".to_owned())
        );
    }
}
