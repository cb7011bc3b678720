//! A pool that passed validation: what workflows take as input.
//!
//! Durations are parsed, percentages are [`Amount`]s and the template carries its hash, so no
//! workflow ever parses a string or meets a value validation would have refused.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::spec::MachineTemplate;

/// A validated pool: only [`super::validate()`] builds one from a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidPool {
    /// The pool's name (`metadata.name`), at most [`super::MAX_POOL_NAME_LEN`] characters.
    pub name: String,
    /// How many machines the pool should have.
    pub replicas: u32,
    /// The machine template, as written (with the parser's defaults filled in).
    pub template: MachineTemplate,
    /// [`super::template_hash`] of `template`: the `nodewright.io/template` label and tag.
    pub template_hash: String,
    /// How a rolling update replaces machines.
    pub strategy: RolloutStrategy,
    /// How nodes are drained.
    pub drain: DrainPolicy,
    /// How long machines may take.
    pub timeouts: MachineTimeouts,
    /// When a machine is unhealthy and how the pool controller remediates it (`spec.health`);
    /// the defaults in inputs recorded before it existed. Not part of the template: changing it
    /// never changes the template hash.
    #[serde(default)]
    pub health: crate::controller::HealthPolicy,
}

/// A number of machines, or a percentage of `replicas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Amount {
    /// An absolute number of machines.
    Count(u32),
    /// A percentage of `replicas`, 0 to 100.
    Percent(u32),
}

impl Amount {
    /// The number of machines this amount stands for in a pool of `replicas`.
    ///
    /// A percentage is rounded up when `round_up` (Kubernetes does so for `maxSurge`) and down
    /// otherwise (for `maxUnavailable`), so that `10%` of 5 machines is a surge of 1 but an
    /// unavailability of 0.
    pub fn resolve(&self, replicas: u32, round_up: bool) -> u32 {
        match *self {
            Amount::Count(count) => count,
            Amount::Percent(percent) => {
                let scaled = u64::from(replicas) * u64::from(percent);
                let machines = if round_up {
                    scaled.div_ceil(100)
                } else {
                    scaled / 100
                };
                u32::try_from(machines).unwrap_or(u32::MAX)
            }
        }
    }

    /// Whether the amount is zero whatever `replicas` is (`0` or `"0%"`).
    pub fn is_zero(&self) -> bool {
        matches!(self, Amount::Count(0) | Amount::Percent(0))
    }

    /// Reads an amount as typed on a command line: `2` (at most
    /// [`crate::limits::MAX_BUDGET_COUNT`]) or `25%` (0% to 100%).
    ///
    /// # Errors
    ///
    /// What is wrong with the text and an example, when it is neither.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let parsed = match text.strip_suffix('%') {
            Some(percent) => percent
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|p| *p <= 100)
                .map(Amount::Percent),
            None => text.parse::<u32>().ok().map(Amount::Count),
        };
        let parsed = parsed.ok_or_else(|| {
            format!(
                "{} is neither a number of machines (e.g. 2) nor a percentage from 0% to 100% (e.g. 25%)",
                crate::text::quoted(text)
            )
        })?;
        parsed
            .check()
            .map_err(|problem| format!("{} {problem}", crate::text::quoted(text)))?;
        Ok(parsed)
    }

    /// Whether the amount is within its bounds: a count of at most
    /// [`crate::limits::MAX_BUDGET_COUNT`] machines, a percentage of at most 100%.
    ///
    /// # Errors
    ///
    /// What is wrong and the fix, e.g. `is more than 1000 machines; give at most 1000 or a
    /// percentage (e.g. 25%)`.
    pub fn check(&self) -> Result<(), String> {
        let max = crate::limits::MAX_BUDGET_COUNT;
        match *self {
            Amount::Count(count) if count > max => Err(format!(
                "is more than {max} machines; give at most {max} or a percentage (e.g. 25%)"
            )),
            Amount::Percent(percent) if percent > 100 => {
                Err("is more than 100%; give a percentage from 0% to 100% (e.g. 25%)".to_owned())
            }
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Amount::Count(count) => write!(f, "{count}"),
            Amount::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

/// How a rolling update replaces machines (Kubernetes Deployment semantics).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutStrategy {
    /// Machines above `replicas` allowed during a rollout; percentages round up.
    pub max_surge: Amount,
    /// Machines below `replicas` allowed during a rollout; percentages round down.
    pub max_unavailable: Amount,
    /// Failed machine creations or deletions after which a rollout pauses itself; at least 1.
    pub max_failures: u32,
    /// A rollout that makes no progress for this long is marked stalled.
    pub progress_deadline: Duration,
    /// How long a machine's Node must have been Ready before the machine counts available
    /// (`spec.minReadySeconds` when set, else `spec.strategy.minReadySeconds`); zero in requests
    /// recorded before it existed.
    #[serde(default)]
    pub min_ready: Duration,
}

impl RolloutStrategy {
    /// [`min_ready`](Self::min_ready) in whole seconds, as the planner takes it.
    pub fn min_ready_secs(&self) -> i64 {
        i64::try_from(self.min_ready.as_secs()).unwrap_or(i64::MAX)
    }
}

/// How nodes are drained (machine-controller-manager's settings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainPolicy {
    /// After this long the drain switches to force mode.
    pub timeout: Duration,
    /// How often an eviction blocked by a PodDisruptionBudget is retried.
    pub pdb_retry_interval: Duration,
    /// How long to wait for a pod's volumes to detach, on top of its grace period.
    pub volume_detach_timeout: Duration,
    /// How long to wait for a moved volume to attach on its new node.
    pub volume_attach_timeout: Duration,
    /// A node unhealthy this long is drained in force mode.
    pub force_after_unhealthy: Duration,
    /// What a drain does with pods whose eviction loses data (`emptyDir` volumes, no
    /// controller); `None` for the default of the drain's purpose (see
    /// [`crate::drain::LocalDataPolicy::or_default_for`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_data: Option<crate::drain::LocalDataPolicy>,
    /// The drain rules (`spec.drain.rules`, checked): per pod, `Drain`, `Skip` or
    /// `WaitCompleted` and the tier; none for a pool without them (see
    /// [`crate::drain::plan_with_rules`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<crate::drain::DrainRule>,
    /// The drain's hard deadline, counted from its start (`spec.drain.terminationGracePeriod`,
    /// Karpenter's NodePool field): force mode comes at the latest then, whatever extends the
    /// deadline, and past it pods marked do-not-disrupt are deleted too (see
    /// [`crate::drain::hard_deadline`]). `None`: the drain's deadline is its hard deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<Duration>,
}

/// How long machines may take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineTimeouts {
    /// From the start of a create until the Node is Ready.
    pub creation: Duration,
    /// A Node NotReady this long is unhealthy.
    pub health: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn resolves_counts_and_percentages_as_kubernetes_does() {
        let table = [
            // (amount, replicas, round_up, expected)
            (Amount::Count(2), 10, true, 2),
            (Amount::Count(2), 0, false, 2),
            (Amount::Percent(25), 10, true, 3),
            (Amount::Percent(25), 10, false, 2),
            (Amount::Percent(10), 5, true, 1),
            (Amount::Percent(10), 5, false, 0),
            (Amount::Percent(100), 7, false, 7),
            (Amount::Percent(0), 7, true, 0),
            (Amount::Percent(50), 0, true, 0),
            (Amount::Percent(100), u32::MAX, true, u32::MAX),
        ];
        for (amount, replicas, round_up, expected) in table {
            assert_eq!(
                amount.resolve(replicas, round_up),
                expected,
                "{amount:?} of {replicas}, round_up={round_up}"
            );
        }
    }

    #[test]
    fn parses_what_people_type_and_prints_it_back() {
        for (text, expected) in [
            ("2", Ok(Amount::Count(2))),
            (" 0 ", Ok(Amount::Count(0))),
            ("25%", Ok(Amount::Percent(25))),
            ("100%", Ok(Amount::Percent(100))),
        ] {
            assert_eq!(Amount::parse(text), expected, "{text}");
        }
        for bad in ["-1", "101%", "two", "", "1.5", "%", "1001", "4294967295"] {
            let error = Amount::parse(bad).expect_err(bad);
            assert!(error.contains("e.g. 25%"), "{bad}: {error}");
        }
        assert_eq!(Amount::parse("1000"), Ok(Amount::Count(1000)));
        assert_eq!(
            Amount::parse("1001"),
            Err(
                "\"1001\" is more than 1000 machines; give at most 1000 or a percentage (e.g. 25%)"
                    .to_owned()
            )
        );
        assert!(Amount::Percent(101).check().is_err());
        assert_eq!(Amount::Percent(25).to_string(), "25%");
        assert_eq!(Amount::Count(3).to_string(), "3");
    }

    #[test]
    fn serializes_amounts_with_their_kind() {
        let json = serde_json::to_string(&[Amount::Count(1), Amount::Percent(25)])
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(json, r#"[{"count":1},{"percent":25}]"#);
    }

    proptest! {
        #[test]
        fn a_percentage_never_exceeds_replicas_and_rounding_differs_by_at_most_one(
            percent in 0u32..=100,
            replicas in 0u32..=10_000,
        ) {
            let up = Amount::Percent(percent).resolve(replicas, true);
            let down = Amount::Percent(percent).resolve(replicas, false);
            prop_assert!(down <= up && up <= replicas);
            prop_assert!(up - down <= 1);
        }
    }
}
