//! Table tests of how the drain's steps change its status.

use super::*;
use crate::drain::{
    LocalDataPod, PdbFacts, PodRef, SkipReason, SkippedPod, TrackedVolume, UnwaitedVolume,
    VolumePod, VolumeWait,
};
use crate::machine::MachineStatus;

fn status() -> DrainStatus {
    DrainStatus::new(MachineStatus::new("drain", "web-abcde", None, &Step::DRAIN))
}

fn pod(name: &str) -> PodRef {
    PodRef {
        namespace: "shop".to_owned(),
        name: name.to_owned(),
        uid: format!("uid-{name}"),
        grace_period_seconds: 30,
    }
}

fn pdb(disruptions_allowed: i32, current_healthy: i32) -> PdbFacts {
    PdbFacts {
        namespace: "shop".to_owned(),
        name: "web".to_owned(),
        generation: None,
        observed_generation: None,
        expected_pods: 2,
        current_healthy,
        desired_healthy: 2,
        disruptions_allowed,
    }
}

fn volume(pv: &str, disk: Option<&str>, state: VolumeState) -> VolumeProgress {
    VolumeProgress {
        persistent_volume: pv.to_owned(),
        pod: "shop/db".to_owned(),
        disk_id: disk.map(ToOwned::to_owned),
        state,
        new_node: None,
        detail: None,
    }
}

#[test]
fn the_plan_shows_every_pod_and_each_tracked_volume_once() {
    let plan = DrainPlan {
        skipped: vec![SkippedPod {
            pod: "kube-system/proxy".to_owned(),
            reason: SkipReason::DaemonSet,
            rule: None,
        }],
        terminating: vec![pod("old")],
        without_volumes: vec![pod("web")],
        with_volumes: vec![VolumePod {
            pod: pod("db"),
            priority: 0,
            tracked: vec![TrackedVolume {
                persistent_volume: "pv-1".to_owned(),
                disk_id: Some("/disks/d1".to_owned()),
            }],
            untracked: Vec::new(),
        }],
        local_data: Vec::new(),
        refused: vec![LocalDataPod {
            pod: "shop/cache".to_owned(),
            empty_dirs: vec!["scratch".to_owned()],
            no_controller: false,
        }],
        not_waited_on: vec![UnwaitedVolume {
            persistent_volume: "pv-share".to_owned(),
            pod: "shop/files".to_owned(),
            why: VolumeWait::NeedsNoAttach,
        }],
    };
    let mut shown = status();
    shown.show_plan(&plan);
    shown.show_plan(&plan);
    let states: Vec<(&str, PodState, bool)> = shown
        .pods
        .iter()
        .map(|p| (p.pod.as_str(), p.state, p.with_volumes))
        .collect();
    assert_eq!(
        states,
        [
            ("kube-system/proxy", PodState::Skipped, false),
            ("shop/old", PodState::Terminating, false),
            ("shop/cache", PodState::Refused, false),
            ("shop/web", PodState::Waiting, false),
            ("shop/db", PodState::Waiting, true),
        ]
    );
    let mut share = volume("pv-share", None, VolumeState::NotWaitedOn);
    share.pod = "shop/files".to_owned();
    share.detail = Some("needs no attach".to_owned());
    assert_eq!(
        shown.volumes,
        [
            volume("pv-1", Some("/disks/d1"), VolumeState::Attached),
            share
        ]
    );
    assert_eq!(
        shown.pods[2].detail.as_deref(),
        Some("refused: local data (emptyDir scratch)")
    );
}

#[test]
fn an_eviction_answer_sets_the_pod_and_its_blocking_budget() {
    let misconfigured = pdb(0, 2);
    let waiting = pdb(0, 1);
    let budgets = ["shop/team".to_owned(), "shop/web".to_owned()];
    let table = [
        (
            EvictionAnswer::Accepted,
            PodState::Evicting,
            "evicted",
            None,
        ),
        (EvictionAnswer::Gone, PodState::Gone, "already gone", None),
        (
            EvictionAnswer::Blocked {
                pdb: Some(&misconfigured),
                message: "",
            },
            PodState::Blocked,
            "blocked by PodDisruptionBudget shop/web (misconfigured: all its pods are healthy and it allows no disruption)",
            Some(true),
        ),
        (
            EvictionAnswer::Blocked {
                pdb: Some(&waiting),
                message: "",
            },
            PodState::Blocked,
            "blocked by PodDisruptionBudget shop/web (0 disruptions allowed)",
            Some(false),
        ),
        (
            EvictionAnswer::Blocked {
                pdb: None,
                message: "Too many requests",
            },
            PodState::Blocked,
            "eviction refused: Too many requests",
            None,
        ),
        (
            EvictionAnswer::Refused {
                code: 500,
                reason: "InternalError",
                message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                budgets: &budgets,
            },
            PodState::Blocked,
            "eviction refused: the pod is selected by more than one PodDisruptionBudget (shop/team, shop/web), which the eviction API does not support; retried until the deadline, then force mode (remove one budget to let it go now)",
            None,
        ),
        (
            EvictionAnswer::Refused {
                code: 403,
                reason: "NamespaceTerminating",
                message: "namespace shop is being terminated",
                budgets: &[],
            },
            PodState::Evicting,
            "its namespace is being deleted: waiting for the pod to go",
            None,
        ),
    ];
    for (answer, state, detail, blocking) in table {
        let mut recorded = status();
        recorded.set_pod("shop/web", PodState::Waiting, None);
        recorded.record_eviction("shop/web", &answer);
        let entry = &recorded.pods[0];
        assert_eq!((entry.state, entry.evictions), (state, 1), "{answer:?}");
        assert_eq!(entry.detail.as_deref(), Some(detail), "{answer:?}");
        let block = recorded.pdbs_blocking.first().map(|b| b.misconfigured);
        assert_eq!(block, blocking, "{answer:?}");
    }
}

#[test]
fn an_accepted_eviction_clears_the_block_of_an_earlier_one() {
    let budget = pdb(0, 1);
    let mut recorded = status();
    recorded.set_pod("shop/web", PodState::Waiting, None);
    recorded.record_eviction(
        "shop/web",
        &EvictionAnswer::Blocked {
            pdb: Some(&budget),
            message: "",
        },
    );
    recorded.record_eviction("shop/web", &EvictionAnswer::Accepted);
    assert!(recorded.pdbs_blocking.is_empty());
    assert_eq!(recorded.pods[0].evictions, 2);
}

#[test]
fn force_mode_marks_released_volumes_and_skips_the_graceful_steps_left() {
    use VolumeState::{
        Attached, DetachTimedOut, Detaching, ForceDetached, NotWaitedOn, Reattached,
    };
    let table = [
        (
            "disk detached",
            Some("/DISKS/D1"),
            Attached,
            vec!["/disks/d1"],
            false,
            false,
            ForceDetached,
        ),
        (
            "disk not detached",
            Some("/disks/d1"),
            DetachTimedOut,
            vec!["/disks/d2"],
            true,
            false,
            DetachTimedOut,
        ),
        (
            "no disk, attachments deleted",
            None,
            Attached,
            vec![],
            true,
            false,
            ForceDetached,
        ),
        (
            "no disk, nothing released",
            None,
            Attached,
            vec![],
            false,
            false,
            Attached,
        ),
        (
            "reattached elsewhere stays",
            Some("/disks/d1"),
            Reattached,
            vec!["/disks/d1"],
            true,
            false,
            Reattached,
        ),
        (
            "a volume not waited on is not force-detached",
            None,
            NotWaitedOn,
            vec![],
            true,
            false,
            NotWaitedOn,
        ),
        (
            "disk detached before the force detach looked: Azure lists none",
            Some("/disks/d1"),
            Detaching,
            vec![],
            true,
            true,
            ForceDetached,
        ),
        (
            "Azure lists none but the volume reattached elsewhere",
            Some("/disks/d1"),
            Reattached,
            vec![],
            true,
            true,
            Reattached,
        ),
        (
            "Azure still lists disks, this one not force-detached",
            Some("/disks/d1"),
            Attached,
            vec![],
            true,
            false,
            Attached,
        ),
    ];
    for (name, disk, before, detached, released_here, none_left, after) in table {
        let mut forced = status();
        forced.volumes.push(volume("pv-1", disk, before));
        let detached: Vec<String> = detached.into_iter().map(ToOwned::to_owned).collect();
        let release = ForceRelease {
            force_detached: &detached,
            released_here,
            azure_holds_none: none_left,
        };
        forced.end_force_mode(&release, "2026-11-21T10:00:00Z");
        assert_eq!(forced.volumes[0].state, after, "{name}");
    }
    let mut forced = status();
    forced.run.start(Step::EvictPods, "2026-11-21T09:00:00Z");
    forced
        .run
        .finish(Step::EvictPods, "2026-11-21T09:30:00Z", None);
    forced.end_force_mode(&ForceRelease::default(), "2026-11-21T10:00:00Z");
    let detail = |step: Step| {
        forced
            .run
            .steps
            .iter()
            .find(|p| p.step == step)
            .and_then(|p| p.detail.clone())
    };
    assert_eq!(detail(Step::EvictPods), None);
    assert_eq!(
        detail(Step::MoveVolumes).as_deref(),
        Some("skipped: force mode")
    );
}

#[test]
fn a_fresh_look_shows_the_pods_that_arrived_and_keeps_the_others_as_they_were() {
    let mut shown = status();
    shown.set_pod(
        "shop/batch",
        PodState::Completed,
        Some("completed".to_owned()),
    );
    shown.set_pod("shop/web", PodState::Gone, None);
    let plan = RuledPlan::untiered(DrainPlan {
        skipped: vec![SkippedPod {
            pod: "shop/batch".to_owned(),
            reason: SkipReason::Finished,
            rule: None,
        }],
        without_volumes: vec![pod("late")],
        ..DrainPlan::default()
    });
    shown.show_arrivals(&plan);
    let states: Vec<(&str, PodState)> = shown
        .pods
        .iter()
        .map(|p| (p.pod.as_str(), p.state))
        .collect();
    assert_eq!(
        states,
        [
            ("shop/batch", PodState::Completed),
            ("shop/web", PodState::Gone),
            ("shop/late", PodState::Waiting),
        ]
    );
}

fn stuck_db() -> VolumePod {
    VolumePod {
        pod: pod("db"),
        priority: 0,
        tracked: vec![TrackedVolume {
            persistent_volume: "pv-1".to_owned(),
            disk_id: Some("/disks/d1".to_owned()),
        }],
        untracked: Vec::new(),
    }
}

#[test]
fn a_continued_run_shows_what_the_runs_before_it_left() {
    let mut before = status();
    before.show_plan(&DrainPlan {
        with_volumes: vec![stuck_db()],
        ..DrainPlan::default()
    });
    before.set_pod("shop/db", PodState::Gone, None);
    before.count_eviction("shop/db");
    before.set_volume("pv-1", VolumeState::DetachTimedOut, None);
    let table = [
        (None, DrainMode::Graceful),
        (
            Some("the drain deadline passed".to_owned()),
            DrainMode::Force {
                reason: "the drain deadline passed".to_owned(),
            },
        ),
    ];
    for (forced, mode) in table {
        let resume = crate::drain::DrainResume {
            started_at: String::new(),
            deadline: String::new(),
            force_requested: false,
            policy: crate::pool::DrainPolicy::default(),
            done_so_far: crate::drain::DrainedNode {
                warnings: vec!["pv-1 did not detach".to_owned()],
                overridden: vec!["shop/db (nodewright.io/do-not-disrupt): evicted".to_owned()],
                forced: forced.clone(),
                ..crate::drain::DrainedNode::default()
            },
            continuation: 1,
            stuck_volumes: vec![stuck_db()],
            pods: before.pods.clone(),
            volumes: before.volumes.clone(),
        };
        let mut next = status();
        next.carry_over(&resume);
        assert_eq!(next.mode, mode, "{forced:?}");
        assert_eq!(next.warnings, resume.done_so_far.warnings);
        assert_eq!(next.overridden, resume.done_so_far.overridden);
        let volume = next
            .volumes
            .first()
            .map(|v| (v.persistent_volume.as_str(), v.state));
        assert_eq!(volume, Some(("pv-1", VolumeState::DetachTimedOut)));
        let db = next.pods.iter().find(|p| p.pod == "shop/db");
        assert_eq!(
            db.map(|p| (p.state, p.evictions)),
            Some((PodState::Gone, 1))
        );
        // What force mode does next to the carried volume.
        let detached = ["/disks/D1".to_owned()];
        let release = ForceRelease {
            force_detached: &detached,
            released_here: true,
            azure_holds_none: false,
        };
        next.end_force_mode(&release, "2026-11-27T10:00:00Z");
        let volume = next.volumes.first().map(|v| v.state);
        assert_eq!(volume, Some(VolumeState::ForceDetached));
    }
}

#[test]
fn a_resume_written_before_the_stuck_volumes_were_carried_still_reads() {
    let older = serde_json::json!({
        "startedAt": "2026-11-27T08:00:00Z",
        "deadline": "2026-11-27T10:00:00Z",
        "forceRequested": false,
        "policy": serde_json::to_value(crate::pool::DrainPolicy::default()).unwrap_or_default(),
        "doneSoFar": serde_json::to_value(crate::drain::DrainedNode::default()).unwrap_or_default(),
        "continuation": 2,
    });
    let read: Result<crate::drain::DrainResume, _> = serde_json::from_value(older);
    let read = read.map_err(|e| e.to_string());
    assert_eq!(
        read.map(|r| (
            r.continuation,
            r.stuck_volumes.len(),
            r.pods.len(),
            r.volumes.len()
        )),
        Ok((2, 0, 0, 0))
    );
}

#[test]
fn a_carried_pod_no_longer_on_the_node_has_gone() {
    let mut carried = status();
    let table = [
        ("shop/blocked", PodState::Blocked, true, PodState::Gone),
        (
            "shop/evicting",
            PodState::Evicting,
            false,
            PodState::Evicting,
        ),
        ("shop/left", PodState::Evicting, true, PodState::Gone),
        ("shop/moved", PodState::Gone, true, PodState::Gone),
        (
            "shop/forced",
            PodState::ForceDeleted,
            true,
            PodState::ForceDeleted,
        ),
        ("shop/held", PodState::Held, false, PodState::Held),
    ];
    for (pod, state, _, _) in table {
        carried.set_pod(pod, state, None);
    }
    carried.pdbs_blocking.push(crate::drain::PdbBlock {
        pdb: "shop/web".to_owned(),
        pods: vec!["shop/blocked".to_owned()],
        misconfigured: false,
        disruptions_allowed: 0,
    });
    let present: Vec<String> = table
        .iter()
        .filter(|(_, _, absent, _)| !absent)
        .map(|(pod, _, _, _)| (*pod).to_owned())
        .collect();
    carried.settle_carried(&present);
    for (pod, _, _, expected) in table {
        let state = carried.pods.iter().find(|p| p.pod == pod).map(|p| p.state);
        assert_eq!(state, Some(expected), "{pod}");
    }
    assert!(carried.pdbs_blocking.iter().all(|b| b.pods.is_empty()));
}
