//! When a drain stops waiting for graceful termination and switches to force mode.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A node condition as the drain reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionFacts {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `lastTransitionTime`, in seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
}

/// The health of the node being drained.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeHealth {
    /// The `Ready` condition, when the node has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<ConditionFacts>,
    /// The `ReadonlyFilesystem` condition, when the node has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readonly_filesystem: Option<ConditionFacts>,
}

/// A drain's hard deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HardDeadline {
    /// When it passes.
    pub at: i64,
    /// The `terminationGracePeriod` it comes from, in seconds.
    pub period_seconds: u64,
}

/// Why a drain is in force mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum ForceReason {
    /// Asked for: `--force` at the start or the `force` signal.
    Requested,
    /// The drain deadline passed.
    DeadlinePassed,
    /// The drain's hard deadline (`terminationGracePeriod`) passed: force mode overrides
    /// do-not-disrupt marks too.
    HardDeadlinePassed {
        /// The `terminationGracePeriod`, in seconds.
        after_seconds: u64,
    },
    /// The node has not been Ready for longer than the threshold.
    NotReady {
        /// For how long, in seconds.
        for_seconds: u64,
    },
    /// The node's root filesystem has been read-only for longer than the threshold.
    ReadonlyFilesystem {
        /// For how long, in seconds.
        for_seconds: u64,
    },
}

impl std::fmt::Display for ForceReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ForceReason::Requested => f.write_str("force was requested"),
            ForceReason::DeadlinePassed => f.write_str("the drain deadline passed"),
            ForceReason::HardDeadlinePassed { after_seconds } => write!(
                f,
                "terminationGracePeriod {} passed (the drain's hard deadline)",
                crate::limits::short(std::time::Duration::from_secs(*after_seconds))
            ),
            ForceReason::NotReady { for_seconds } => {
                write!(f, "the node has not been Ready for {for_seconds}s")
            }
            ForceReason::ReadonlyFilesystem { for_seconds } => {
                write!(
                    f,
                    "the node's filesystem has been read-only for {for_seconds}s"
                )
            }
        }
    }
}

/// Whether the drain must switch to force mode now, and why (MCM: a forced drain when the drain
/// timeout passed, on request, or when the node has been NotReady — `Ready` not `True`, which
/// includes `Unknown` — or has had `ReadonlyFilesystem` not `False` for longer than
/// `unhealthy_after`), and once the hard deadline `hard` has passed. Times are seconds since the
/// Unix epoch.
pub fn force_reason(
    now: i64,
    deadline: i64,
    hard: Option<HardDeadline>,
    health: &NodeHealth,
    unhealthy_after: Duration,
    requested: bool,
) -> Option<ForceReason> {
    if requested {
        return Some(ForceReason::Requested);
    }
    if let Some(hard) = hard.filter(|hard| now >= hard.at) {
        return Some(ForceReason::HardDeadlinePassed {
            after_seconds: hard.period_seconds,
        });
    }
    if now >= deadline {
        return Some(ForceReason::DeadlinePassed);
    }
    let lasting = |condition: &Option<ConditionFacts>, healthy: &str| -> Option<u64> {
        let condition = condition.as_ref()?;
        if condition.status == healthy {
            return None;
        }
        let held = u64::try_from(now.checked_sub(condition.since?)?).ok()?;
        (held > unhealthy_after.as_secs()).then_some(held)
    };
    if let Some(for_seconds) = lasting(&health.ready, "True") {
        return Some(ForceReason::NotReady { for_seconds });
    }
    if let Some(for_seconds) = lasting(&health.readonly_filesystem, "False") {
        return Some(ForceReason::ReadonlyFilesystem { for_seconds });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> i64 {
        1_800_000_000 + secs
    }

    fn condition(status: &str, since: i64) -> Option<ConditionFacts> {
        Some(ConditionFacts {
            status: status.into(),
            since: Some(at(since)),
        })
    }

    #[test]
    fn decides_force_as_mcm_does() {
        let five_minutes = Duration::from_secs(300);
        let ready = NodeHealth {
            ready: condition("True", 0),
            readonly_filesystem: condition("False", 0),
        };
        let not_ready = NodeHealth {
            ready: condition("False", 0),
            readonly_filesystem: None,
        };
        let unknown = NodeHealth {
            ready: condition("Unknown", 0),
            readonly_filesystem: None,
        };
        let read_only = NodeHealth {
            ready: condition("True", 0),
            readonly_filesystem: condition("True", 0),
        };
        let none = NodeHealth::default();
        let deadline = at(7200);
        let table: Vec<(&str, i64, &NodeHealth, bool, Option<ForceReason>)> = vec![
            ("healthy, in time", 600, &ready, false, None),
            ("requested", 1, &ready, true, Some(ForceReason::Requested)),
            (
                "deadline passed",
                7200,
                &ready,
                false,
                Some(ForceReason::DeadlinePassed),
            ),
            ("NotReady for 4m", 240, &not_ready, false, None),
            ("NotReady exactly 5m", 300, &not_ready, false, None),
            (
                "NotReady for 5m1s",
                301,
                &not_ready,
                false,
                Some(ForceReason::NotReady { for_seconds: 301 }),
            ),
            (
                "Unknown counts as NotReady",
                400,
                &unknown,
                false,
                Some(ForceReason::NotReady { for_seconds: 400 }),
            ),
            (
                "read-only filesystem",
                900,
                &read_only,
                false,
                Some(ForceReason::ReadonlyFilesystem { for_seconds: 900 }),
            ),
            ("no conditions at all", 900, &none, false, None),
        ];
        for (what, now, health, requested, expected) in table {
            assert_eq!(
                force_reason(at(now), deadline, None, health, five_minutes, requested),
                expected,
                "{what}"
            );
        }
    }

    #[test]
    fn the_hard_deadline_comes_before_every_reason_but_a_request() {
        let hard = Some(HardDeadline {
            at: at(600),
            period_seconds: 600,
        });
        let not_ready = NodeHealth {
            ready: condition("False", 0),
            readonly_filesystem: None,
        };
        let passed = Some(ForceReason::HardDeadlinePassed { after_seconds: 600 });
        let healthy = NodeHealth::default();
        // (what, now, soft deadline, health, requested, expected)
        type Row<'a> = (&'a str, i64, i64, &'a NodeHealth, bool, Option<ForceReason>);
        let table: Vec<Row<'_>> = vec![
            ("before it", 599, at(7200), &healthy, false, None),
            ("at it", 600, at(7200), &healthy, false, passed.clone()),
            (
                "past both deadlines",
                7300,
                at(7200),
                &not_ready,
                false,
                passed,
            ),
            (
                "the soft deadline first",
                300,
                at(300),
                &healthy,
                false,
                Some(ForceReason::DeadlinePassed),
            ),
            (
                "a request first",
                700,
                at(300),
                &healthy,
                true,
                Some(ForceReason::Requested),
            ),
        ];
        let five_minutes = Duration::from_secs(300);
        for (what, now, deadline, health, requested, expected) in table {
            assert_eq!(
                force_reason(at(now), deadline, hard, health, five_minutes, requested),
                expected,
                "{what}"
            );
        }
        assert_eq!(
            ForceReason::HardDeadlinePassed {
                after_seconds: 7200
            }
            .to_string(),
            "terminationGracePeriod 2h passed (the drain's hard deadline)"
        );
    }

    #[test]
    fn reasons_read_well() {
        assert_eq!(
            ForceReason::NotReady { for_seconds: 301 }.to_string(),
            "the node has not been Ready for 301s"
        );
        assert_eq!(ForceReason::Requested.to_string(), "force was requested");
    }

    fn any_condition() -> impl proptest::strategy::Strategy<Value = Option<ConditionFacts>> {
        use proptest::prelude::*;
        proptest::option::of(
            (
                prop_oneof![
                    Just("True".to_owned()),
                    Just("False".to_owned()),
                    Just("Unknown".to_owned()),
                    ".{0,5}",
                ],
                proptest::option::of(any::<i64>()),
            )
                .prop_map(|(status, since)| ConditionFacts { status, since }),
        )
    }

    proptest::proptest! {
        /// Any clock, deadline, transition times and threshold: an answer, never a panic, and a
        /// health reason only past the threshold.
        #[test]
        fn any_times_and_threshold_give_an_answer_within_the_rules(
            now in proptest::prelude::any::<i64>(),
            deadline in proptest::prelude::any::<i64>(),
            ready in any_condition(),
            readonly_filesystem in any_condition(),
            threshold in proptest::prelude::any::<u64>(),
            nanos in 0u32..1_000_000_000,
            requested in proptest::prelude::any::<bool>(),
        ) {
            let health = NodeHealth { ready, readonly_filesystem };
            let unhealthy_after = Duration::new(threshold, nanos);
            let reason = force_reason(now, deadline, None, &health, unhealthy_after, requested);
            match reason {
                Some(ForceReason::HardDeadlinePassed { .. }) => proptest::prop_assert!(false),
                Some(ForceReason::Requested) => proptest::prop_assert!(requested),
                Some(ForceReason::DeadlinePassed) => proptest::prop_assert!(now >= deadline),
                Some(ForceReason::NotReady { for_seconds } | ForceReason::ReadonlyFilesystem { for_seconds }) => {
                    proptest::prop_assert!(for_seconds > threshold);
                }
                None => proptest::prop_assert!(!requested && now < deadline),
            }
            if let Some(reason) = &reason {
                proptest::prop_assert!(!reason.to_string().is_empty());
            }
        }
    }
}
