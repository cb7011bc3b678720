//! How a finished sweep maps to the CLI's exit code: a sweep that did what it planned (or a dry
//! run) is success; a frozen sweep, a braked one or one nobody approved, a scheduled run that
//! gave way to another sweep, or one with a failed removal (or taint removal) is exit 3 with the audit's summary;
//! one refused for its settings (a grace below the cluster's floor) is exit 2, bad input.

use nodewright_model::sweep::{Outcome, SweepAudit, SweepOutcome};

use crate::CliError;

/// `Ok` for a completed sweep without a failed removal and for a dry run; a refused one is
/// [`CliError::InvalidInput`] with its reason; otherwise [`CliError::RunFailed`] with the
/// audit's summary.
pub fn verdict(audit: &SweepAudit) -> Result<(), CliError> {
    let failed_removal = audit
        .entries
        .iter()
        .any(|entry| matches!(entry.outcome, Some(Outcome::Failed { .. })));
    if let SweepOutcome::Refused { reason } = &audit.outcome {
        return Err(CliError::InvalidInput(reason.clone()));
    }
    let clean = match audit.outcome {
        SweepOutcome::Completed | SweepOutcome::DryRun => !failed_removal,
        SweepOutcome::Frozen { .. }
        | SweepOutcome::NotApproved { .. }
        | SweepOutcome::Braked { .. }
        | SweepOutcome::Skipped { .. }
        | SweepOutcome::Refused { .. }
        | SweepOutcome::Canceled { .. } => false,
    };
    if clean {
        Ok(())
    } else {
        Err(CliError::RunFailed(audit.summary()))
    }
}

#[cfg(test)]
mod tests {
    use nodewright_model::ClusterName;
    use nodewright_model::sweep::{Action, Decision, Rule, Seen, SubjectKind};

    use super::*;

    fn audit(outcome: SweepOutcome, removal: Option<Outcome>) -> SweepAudit {
        let cluster = ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"));
        let decisions = vec![
            Decision {
                kind: SubjectKind::Vm,
                name: "web-orph1".to_owned(),
                rule: Rule::OrphanVm,
                action: Action::Delete,
                detail: String::new(),
                pool: None,
                uid: None,
            },
            Decision {
                kind: SubjectKind::Vm,
                name: "web-keep1".to_owned(),
                rule: Rule::Healthy,
                action: Action::Keep,
                detail: String::new(),
                pool: None,
                uid: None,
            },
        ];
        let mut audit = SweepAudit::of(
            cluster,
            "2026-04-01T10:00:00Z".to_owned(),
            outcome,
            Seen::default(),
            decisions,
        );
        if let Some(outcome) = removal {
            audit.record(0, outcome);
        }
        audit
    }

    /// The exit code `verdict` leads to.
    fn code(audit: &SweepAudit) -> u8 {
        match verdict(audit) {
            Ok(()) => 0,
            Err(CliError::RunFailed(message)) => {
                assert_eq!(message, audit.summary());
                3
            }
            Err(CliError::InvalidInput(message)) => {
                assert!(message.starts_with("--grace"), "{message}");
                2
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn exit_codes_follow_the_outcome() {
        let failed = || Outcome::Failed {
            error: "ARM 500".to_owned(),
        };
        let table = [
            (audit(SweepOutcome::Completed, Some(Outcome::Deleted)), 0),
            (
                audit(SweepOutcome::Completed, Some(Outcome::AlreadyGone)),
                0,
            ),
            (
                audit(
                    SweepOutcome::Completed,
                    Some(Outcome::Skipped {
                        reason: "now kept".to_owned(),
                    }),
                ),
                0,
            ),
            (audit(SweepOutcome::Completed, None), 0),
            (audit(SweepOutcome::DryRun, Some(Outcome::Planned)), 0),
            (audit(SweepOutcome::Completed, Some(failed())), 3),
            (
                audit(
                    SweepOutcome::Frozen {
                        reason: "the Kubernetes API is not healthy".to_owned(),
                    },
                    None,
                ),
                3,
            ),
            (
                audit(
                    SweepOutcome::NotApproved {
                        planned: 12,
                        max_deletions: 10,
                    },
                    Some(Outcome::Skipped {
                        reason: "not approved".to_owned(),
                    }),
                ),
                3,
            ),
            (
                audit(
                    SweepOutcome::Braked {
                        reason: "none of this cluster's 4 VMs has a Node".to_owned(),
                    },
                    None,
                ),
                3,
            ),
            (
                audit(
                    SweepOutcome::Skipped {
                        reason: "another sweep runs".to_owned(),
                    },
                    None,
                ),
                3,
            ),
            (
                audit(
                    SweepOutcome::Refused {
                        reason: "--grace 1m is shorter than ...".to_owned(),
                    },
                    None,
                ),
                2,
            ),
        ];
        for (audit, expected) in table {
            assert_eq!(code(&audit), expected, "{:?}", audit.outcome);
        }
    }
}
