//! The grace floor: a sweep's `--grace` may not be shorter than the longest creation timeout
//! of the cluster's pools, as their machines record it (`nodewright.io-creation-deadline` minus
//! `nodewright.io-created`: the create's start plus its pool's `spec.timeouts.creation`).
//!
//! Every resource is already kept until its own create's deadline (rule `create-may-run`); the
//! floor refuses the whole sweep up front instead, because a grace shorter than a create may
//! take is a configuration mistake — it would make the sweep's verdict on a resource of an
//! older nodewright, or one whose tags an operator edited, depend on luck. The floor is learnt
//! from what the sweep sees: a pool with no machine left has none to protect.

use std::time::Duration;

use super::classify::human;
use super::inventory::Inventory;
use crate::ClusterName;
use crate::limits;
use crate::ownership::{TAG_POOL, is_owned_by};

/// The longest creation timeout among this cluster's resources, and a pool that has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraceFloor {
    /// The creation timeout: deadline minus creation, whole seconds.
    pub creation_timeout: Duration,
    /// The pool whose machine recorded it (the first in name order among equals).
    pub pool: String,
}

/// The floor the cluster's resources set: the longest creation timeout they record, at most
/// [`limits::MAX_CREATION_TIMEOUT`] (a deadline further out is an edited tag, not a pool's
/// timeout). `None` when no resource of the cluster records one.
pub fn grace_floor(inventory: &Inventory, cluster: &ClusterName) -> Option<GraceFloor> {
    inventory
        .resources
        .iter()
        .filter(|resource| is_owned_by(&resource.tags, cluster))
        .filter_map(|resource| {
            let created = resource.created_at?;
            let deadline = resource.creation_deadline?;
            let seconds = u64::try_from(deadline.checked_sub(created)?).ok()?;
            let timeout = Duration::from_secs(seconds).min(limits::MAX_CREATION_TIMEOUT);
            let pool = resource.tags.get(TAG_POOL).cloned().unwrap_or_default();
            Some((timeout, pool))
        })
        // The longest timeout; among equals, the first pool name.
        .max_by(|(a, pool_a), (b, pool_b)| a.cmp(b).then_with(|| pool_b.cmp(pool_a)))
        .map(|(creation_timeout, pool)| GraceFloor {
            creation_timeout,
            pool,
        })
}

/// `Ok` when `grace` is at least the floor; otherwise the refusal, naming both and the fix:
/// `--grace 1m is shorter than the longest creation timeout of this cluster's pools, 20m (pool
/// "workers"): give --grace 20m or more`.
pub fn check_grace(grace: Duration, floor: Option<&GraceFloor>) -> Result<(), String> {
    match floor {
        Some(floor) if grace < floor.creation_timeout => Err(format!(
            "--grace {} is shorter than the longest creation timeout of this cluster's pools, {} (pool {}): a resource younger than that may belong to a create still running; give --grace {} or more",
            human(grace),
            human(floor.creation_timeout),
            crate::text::quoted(&floor.pool),
            human(floor.creation_timeout),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::ownership::TAG_CLUSTER;
    use crate::sweep::inventory::{ArmResource, ResourceKind};

    fn cluster() -> ClusterName {
        ClusterName::parse("cluster", "prod").expect("cluster")
    }

    fn resource(cluster: &str, pool: &str, created: i64, deadline: Option<i64>) -> ArmResource {
        ArmResource {
            kind: ResourceKind::Vm,
            name: format!("{pool}-{created}"),
            tags: BTreeMap::from([
                (TAG_CLUSTER.to_owned(), cluster.to_owned()),
                (TAG_POOL.to_owned(), pool.to_owned()),
            ]),
            provisioning_state: "Succeeded".to_owned(),
            attached_to: None,
            created_at: Some(created),
            creation_deadline: deadline,
            creation_ended: None,
        }
    }

    fn inventory(resources: Vec<ArmResource>) -> Inventory {
        Inventory {
            resources,
            ..Inventory::default()
        }
    }

    #[test]
    fn the_floor_is_the_longest_creation_timeout_of_the_clusters_resources() {
        type Case = (&'static str, Vec<ArmResource>, Option<(u64, &'static str)>);
        let cases: [Case; 6] = [
            ("nothing seen", vec![], None),
            (
                "no deadline recorded",
                vec![resource("prod", "workers", 1_000, None)],
                None,
            ),
            (
                "the longest of two pools",
                vec![
                    resource("prod", "workers", 1_000, Some(1_000 + 1_200)),
                    resource("prod", "gpu", 5_000, Some(5_000 + 3_600)),
                ],
                Some((3_600, "gpu")),
            ),
            (
                "another cluster's pool does not count",
                vec![
                    resource("prod", "workers", 1_000, Some(1_000 + 1_200)),
                    resource("other", "slow", 1_000, Some(1_000 + 7_200)),
                ],
                Some((1_200, "workers")),
            ),
            (
                "an edited deadline counts as the longest timeout at most",
                vec![resource("prod", "workers", 1_000, Some(1_000 + 86_400))],
                Some((7_200, "workers")),
            ),
            (
                "a deadline before the creation is ignored",
                vec![resource("prod", "workers", 1_000, Some(900))],
                None,
            ),
        ];
        for (case, resources, expected) in cases {
            let floor = grace_floor(&inventory(resources), &cluster());
            let expected = expected.map(|(seconds, pool)| GraceFloor {
                creation_timeout: Duration::from_secs(seconds),
                pool: pool.to_owned(),
            });
            assert_eq!(floor, expected, "{case}");
        }
    }

    #[test]
    fn a_grace_below_the_floor_is_refused_naming_both() {
        let floor = GraceFloor {
            creation_timeout: Duration::from_secs(1_200),
            pool: "workers".to_owned(),
        };
        assert_eq!(
            check_grace(Duration::from_secs(1_200), Some(&floor)),
            Ok(())
        );
        assert_eq!(check_grace(Duration::from_secs(1), None), Ok(()));
        assert_eq!(
            check_grace(Duration::from_secs(60), Some(&floor)),
            Err("--grace 1m is shorter than the longest creation timeout of this cluster's pools, 20m (pool \"workers\"): a resource younger than that may belong to a create still running; give --grace 20m or more".to_owned())
        );
    }
}

#[cfg(test)]
mod properties {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::ownership::TAG_CLUSTER;
    use crate::sweep::inventory::{ArmResource, ResourceKind};

    proptest! {
        /// Any recorded creation and deadline times (edited tags included) give a floor within
        /// the longest creation timeout a pool may have, and `check_grace` refuses exactly the
        /// graces below it.
        #[test]
        fn the_floor_is_bounded_and_refuses_only_shorter_graces(
            times in proptest::collection::vec((any::<i64>(), proptest::option::of(any::<i64>())), 0..8),
            grace in any::<u64>(),
        ) {
            let cluster = ClusterName::parse("cluster", "prod").map_err(|e| TestCaseError::fail(e.to_string()))?;
            let resources = times
                .iter()
                .enumerate()
                .map(|(i, (created, deadline))| ArmResource {
                    kind: ResourceKind::Vm,
                    name: format!("m{i}"),
                    tags: BTreeMap::from([
                        (TAG_CLUSTER.to_owned(), "prod".to_owned()),
                        (TAG_POOL.to_owned(), format!("pool{}", i % 3)),
                    ]),
                    provisioning_state: "Succeeded".to_owned(),
                    attached_to: None,
                    created_at: Some(*created),
                    creation_deadline: *deadline,
                    creation_ended: None,
                })
                .collect();
            let inventory = Inventory { resources, ..Inventory::default() };
            let floor = grace_floor(&inventory, &cluster);
            if let Some(floor) = &floor {
                prop_assert!(floor.creation_timeout <= limits::MAX_CREATION_TIMEOUT);
            }
            let grace = Duration::from_secs(grace);
            let refused = check_grace(grace, floor.as_ref()).is_err();
            prop_assert_eq!(refused, floor.is_some_and(|f| grace < f.creation_timeout));
        }
    }
}
