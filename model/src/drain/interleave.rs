//! How the drain's two lanes interleave within a tier: the pods without persistent volumes and
//! the pods with them drain at the same time (MCM runs both lanes at once), a pod a
//! PodDisruptionBudget (or a refusal) holds back never delays another, and the pods with
//! volumes still move one at a time.
//!
//! The drain goes in rounds. Each round evicts every pod without volumes that is due, and (when
//! no pod with volumes is moving) the first pod with volumes that is due, in the plan's order:
//! a pod never refused before comes before one refused before, so a blocked pod is passed over.
//! A refused pod is due again only after the PDB retry interval. A pod still terminating is
//! never evicted again.

/// The lane of a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Without persistent volumes that attach: evicted all at once.
    WithoutVolumes,
    /// With persistent volumes that attach: one at a time.
    WithVolumes,
}

/// Where a pod of a lane stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneStage {
    /// Not asked yet.
    ToEvict,
    /// Its last eviction was refused (a budget, a webhook, the apiserver): asked again when
    /// the PDB retry interval has passed.
    Refused,
    /// Evicted (or going with its namespace): terminating, its volumes moving.
    Leaving,
    /// Gone (or, for a pod with volumes, its volumes followed as far as the drain waits).
    Gone,
}

/// One pod of the tier, in the plan's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LanePod {
    /// Its lane.
    pub lane: Lane,
    /// Where it stands.
    pub stage: LaneStage,
}

/// What the drain does after a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterLanes {
    /// Every pod is gone: the tier's lanes are done.
    Finished,
    /// Pods are left and the history is long: continue as a new run.
    ContinueAsNew,
    /// A pod with volumes is due now: the next round at once.
    NextRound,
    /// Only refused or terminating pods are left: wait for those leaving, pause until the PDB
    /// retry interval has passed, look at the node again, then the next round.
    Pause,
}

/// The pods (indexes into `pods`) the next round evicts; `retry_due` says whether the PDB retry
/// interval has passed since the refused pods were last asked.
pub fn round_evictions(pods: &[LanePod], retry_due: bool) -> Vec<usize> {
    let due = |stage: LaneStage| {
        stage == LaneStage::ToEvict || (retry_due && stage == LaneStage::Refused)
    };
    let mut picked: Vec<usize> = pods
        .iter()
        .enumerate()
        .filter(|(_, p)| p.lane == Lane::WithoutVolumes && due(p.stage))
        .map(|(i, _)| i)
        .collect();
    let volume_moving = pods
        .iter()
        .any(|p| p.lane == Lane::WithVolumes && p.stage == LaneStage::Leaving);
    if !volume_moving {
        let with_volumes = || {
            pods.iter()
                .enumerate()
                .filter(|(_, p)| p.lane == Lane::WithVolumes)
        };
        let fresh = with_volumes().find(|(_, p)| p.stage == LaneStage::ToEvict);
        let again = || with_volumes().find(|(_, p)| retry_due && p.stage == LaneStage::Refused);
        if let Some((i, _)) = fresh.or_else(again) {
            picked.push(i);
        }
    }
    picked.sort_unstable();
    picked
}

/// What follows a round that left `pods` so; `continue_as_new_suggested` is Temporal's hint
/// that the history is long.
pub fn after_lanes(pods: &[LanePod], continue_as_new_suggested: bool) -> AfterLanes {
    if pods.iter().all(|p| p.stage == LaneStage::Gone) {
        AfterLanes::Finished
    } else if continue_as_new_suggested {
        AfterLanes::ContinueAsNew
    } else if !round_evictions(pods, false).is_empty() {
        AfterLanes::NextRound
    } else {
        AfterLanes::Pause
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    use Lane::{WithVolumes as V, WithoutVolumes as P};
    use LaneStage::{Gone, Leaving, Refused, ToEvict};

    fn pod(lane: Lane, stage: LaneStage) -> LanePod {
        LanePod { lane, stage }
    }

    #[test]
    fn a_round_evicts_every_pod_without_volumes_and_one_with_volumes() {
        let table: [(&str, Vec<LanePod>, bool, Vec<usize>); 9] = [
            (
                "first round: both lanes at once",
                vec![
                    pod(P, ToEvict),
                    pod(P, ToEvict),
                    pod(V, ToEvict),
                    pod(V, ToEvict),
                ],
                false,
                vec![0, 1, 2],
            ),
            (
                "a blocked pod without volumes does not hold back the volume lane",
                vec![pod(P, Refused), pod(V, ToEvict), pod(V, ToEvict)],
                false,
                vec![1],
            ),
            (
                "a blocked pod with volumes is passed over",
                vec![pod(V, Refused), pod(V, ToEvict)],
                true,
                vec![1],
            ),
            (
                "refused pods again once the interval passed",
                vec![pod(P, Refused), pod(V, Refused), pod(V, Gone)],
                true,
                vec![0, 1],
            ),
            (
                "refused pods wait for the interval",
                vec![pod(P, Refused), pod(V, Refused)],
                false,
                vec![],
            ),
            (
                "one pod with volumes at a time",
                vec![pod(V, Leaving), pod(V, ToEvict), pod(P, ToEvict)],
                false,
                vec![2],
            ),
            (
                "a pod terminating is not evicted again",
                vec![pod(P, Leaving), pod(P, Gone)],
                true,
                vec![],
            ),
            (
                "volume pods in the plan's order",
                vec![pod(V, Gone), pod(V, ToEvict), pod(V, ToEvict)],
                false,
                vec![1],
            ),
            ("nothing", vec![], true, vec![]),
        ];
        for (said, pods, retry_due, expected) in table {
            assert_eq!(round_evictions(&pods, retry_due), expected, "{said}");
        }
    }

    #[test]
    fn after_a_round_the_drain_goes_on_pauses_or_is_done() {
        let table: [(&str, Vec<LanePod>, bool, AfterLanes); 6] = [
            (
                "all gone",
                vec![pod(P, Gone), pod(V, Gone)],
                true,
                AfterLanes::Finished,
            ),
            ("empty tier", vec![], false, AfterLanes::Finished),
            (
                "next volume pod at once",
                vec![pod(P, Refused), pod(V, Gone), pod(V, ToEvict)],
                false,
                AfterLanes::NextRound,
            ),
            (
                "only refused and leaving pods",
                vec![pod(P, Refused), pod(P, Leaving), pod(V, Refused)],
                false,
                AfterLanes::Pause,
            ),
            (
                "long history",
                vec![pod(P, Refused)],
                true,
                AfterLanes::ContinueAsNew,
            ),
            (
                "terminating only",
                vec![pod(P, Leaving)],
                false,
                AfterLanes::Pause,
            ),
        ];
        for (said, pods, suggested, expected) in table {
            assert_eq!(after_lanes(&pods, suggested), expected, "{said}");
        }
    }

    fn lane_pod() -> impl Strategy<Value = LanePod> {
        (
            prop_oneof![Just(P), Just(V)],
            prop_oneof![Just(ToEvict), Just(Refused), Just(Leaving), Just(Gone)],
        )
            .prop_map(|(lane, stage)| LanePod { lane, stage })
    }

    proptest! {
        #[test]
        fn lanes_never_evict_twice_never_wait_on_a_blocked_pod_and_move_one_volume_pod(
            pods in proptest::collection::vec(lane_pod(), 0..12),
            retry_due in any::<bool>(),
        ) {
            let picked = round_evictions(&pods, retry_due);
            // No pod evicted twice while terminating, none gone evicted.
            for &i in &picked {
                prop_assert!(matches!(pods[i].stage, ToEvict | Refused));
                prop_assert!(retry_due || pods[i].stage == ToEvict);
            }
            // A blocked pod never delays an unblocked one: every pod without volumes due is
            // picked, and a refused pod with volumes only when none is fresh.
            for (i, p) in pods.iter().enumerate() {
                if p.lane == P && (p.stage == ToEvict || (retry_due && p.stage == Refused)) {
                    prop_assert!(picked.contains(&i));
                }
            }
            let volume_picks: Vec<usize> =
                picked.iter().copied().filter(|&i| pods[i].lane == V).collect();
            // One at a time: at most one, and none while one is moving.
            prop_assert!(volume_picks.len() <= 1);
            let moving = pods.iter().any(|p| p.lane == V && p.stage == Leaving);
            prop_assert!(!moving || volume_picks.is_empty());
            let fresh_volume = pods.iter().any(|p| p.lane == V && p.stage == ToEvict);
            if !moving && fresh_volume {
                prop_assert_eq!(volume_picks.len(), 1);
                prop_assert_eq!(pods[volume_picks[0]].stage, ToEvict);
            }
            // The drain only pauses when nothing is due now.
            if after_lanes(&pods, false) == AfterLanes::Pause {
                prop_assert!(round_evictions(&pods, false).is_empty());
            }
        }
    }
}
