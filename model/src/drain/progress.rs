//! How each step of the drain changes its `status`: the plan shown, an eviction's answer, the
//! end of force mode.

use super::answer::{AfterRefusal, after_refusal, refusal_detail, refusal_of};
use super::lanes::EvictionAnswer;
use super::pdb::is_misconfigured;
use super::pods::DrainPlan;
use super::request::DrainResume;
use super::rules::RuledPlan;
use super::status::{DrainMode, DrainStatus, PodState, VolumeProgress, VolumeState};
use crate::machine::{Step, StepState};

impl DrainStatus {
    /// Puts every pod of `plan`, every volume it tracks and every volume it does not wait on
    /// into the status (a volume already there keeps its state).
    pub fn show_plan(&mut self, plan: &DrainPlan) {
        for skipped in &plan.skipped {
            self.set_pod(
                &skipped.pod,
                PodState::Skipped,
                Some(skipped.reason.as_str().to_owned()),
            );
        }
        for pod in &plan.terminating {
            self.set_pod(&pod.key(), PodState::Terminating, None);
        }
        for refused in &plan.refused {
            let detail = format!("refused: local data ({})", refused.what());
            self.set_pod(&refused.pod, PodState::Refused, Some(detail));
        }
        for pod in &plan.without_volumes {
            self.set_pod(&pod.key(), PodState::Waiting, None);
        }
        for volume_pod in &plan.with_volumes {
            let key = volume_pod.pod.key();
            self.set_pod(&key, PodState::Waiting, None);
            if let Some(entry) = self.pods.iter_mut().find(|p| p.pod == key) {
                entry.with_volumes = true;
            }
            for tracked in &volume_pod.tracked {
                if !self
                    .volumes
                    .iter()
                    .any(|v| v.persistent_volume == tracked.persistent_volume)
                {
                    self.volumes.push(VolumeProgress {
                        persistent_volume: tracked.persistent_volume.clone(),
                        pod: key.clone(),
                        disk_id: tracked.disk_id.clone(),
                        state: VolumeState::Attached,
                        new_node: None,
                        detail: None,
                    });
                }
            }
        }
        for unwaited in &plan.not_waited_on {
            if !self
                .volumes
                .iter()
                .any(|v| v.persistent_volume == unwaited.persistent_volume)
            {
                self.volumes.push(VolumeProgress {
                    persistent_volume: unwaited.persistent_volume.clone(),
                    pod: unwaited.pod.clone(),
                    disk_id: None,
                    state: VolumeState::NotWaitedOn,
                    new_node: None,
                    detail: Some(unwaited.why.reason().to_owned()),
                });
            }
        }
    }

    /// Puts the plan of a drain with rules into the status: [`Self::show_plan`] of the whole
    /// Node, the pods waited for until they complete, each pod's rule and, when there is more
    /// than one tier, its tier.
    pub fn show_ruled_plan(&mut self, plan: &RuledPlan) {
        self.show_plan(&plan.whole);
        for waited in &plan.wait_completed {
            let key = waited.pod.key();
            self.set_pod(&key, PodState::AwaitingCompletion, None);
            self.set_rule(&key, format!("WaitCompleted by {}", waited.by));
        }
        for held in &plan.held {
            let key = held.pod.key();
            self.set_pod(&key, PodState::Held, None);
            self.set_rule(
                &key,
                format!(
                    "do not disrupt ({}): not evicted, waited for until it completes or force mode overrides it",
                    held.by
                ),
            );
        }
        for skipped in &plan.whole.skipped {
            if let Some(rule) = &skipped.rule {
                self.set_rule(&skipped.pod, format!("Skip by {rule}"));
            }
        }
        if plan.tiers.len() > 1 {
            for pod in plan.whole.moving() {
                let key = pod.key();
                let tier = plan.orders.get(&key).copied().unwrap_or(0);
                if let Some(entry) = self.pods.iter_mut().find(|p| p.pod == key) {
                    entry.tier = Some(tier);
                }
            }
        }
    }

    /// Shows the pods (and their volumes) of a fresh look's `plan` that the status does not list
    /// yet, those that arrived; the pods it lists keep their states (a pod that completed stays
    /// `completed`, not `skipped`).
    pub fn show_arrivals(&mut self, plan: &RuledPlan) {
        let mut seen = self.clone();
        seen.show_ruled_plan(plan);
        for entry in seen.pods {
            if !self.pods.iter().any(|p| p.pod == entry.pod) {
                self.pods.push(entry);
            }
        }
        for volume in seen.volumes {
            let known = self
                .volumes
                .iter()
                .any(|v| v.persistent_volume == volume.persistent_volume && v.pod == volume.pod);
            if !known {
                self.volumes.push(volume);
            }
        }
    }

    fn set_rule(&mut self, pod: &str, rule: String) {
        if let Some(entry) = self.pods.iter_mut().find(|p| p.pod == pod) {
            entry.rule = Some(rule);
        }
    }

    /// Records one eviction of `pod` and its answer: the pod's state, and the
    /// PodDisruptionBudget blocking it (called misconfigured when waiting cannot help).
    pub fn record_eviction(&mut self, pod: &str, answer: &EvictionAnswer<'_>) {
        self.count_eviction(pod);
        match answer {
            EvictionAnswer::Accepted => {
                self.set_block(pod, None);
                self.set_pod(pod, PodState::Evicting, Some("evicted".to_owned()));
            }
            EvictionAnswer::Gone => {
                self.set_block(pod, None);
                self.set_pod(pod, PodState::Gone, Some("already gone".to_owned()));
            }
            EvictionAnswer::Blocked { pdb, message } => {
                let detail = match pdb {
                    Some(pdb) if is_misconfigured(pdb) => format!(
                        "blocked by PodDisruptionBudget {} (misconfigured: all its pods are healthy and it allows no disruption)",
                        pdb.key()
                    ),
                    Some(pdb) => format!(
                        "blocked by PodDisruptionBudget {} ({} disruptions allowed)",
                        pdb.key(),
                        pdb.disruptions_allowed
                    ),
                    None => format!("eviction refused: {message}"),
                };
                let block =
                    pdb.map(|pdb| (pdb.key(), is_misconfigured(pdb), pdb.disruptions_allowed));
                self.set_block(pod, block);
                self.set_pod(pod, PodState::Blocked, Some(detail));
            }
            EvictionAnswer::Refused {
                code,
                reason,
                message,
                budgets,
            } => {
                let refusal = refusal_of(*code, reason, message);
                let detail = refusal_detail(refusal, *code, budgets, message);
                self.set_block(pod, None);
                let state = match after_refusal(refusal) {
                    AfterRefusal::AwaitGone => PodState::Evicting,
                    AfterRefusal::RetryUntilDeadline => PodState::Blocked,
                };
                self.set_pod(pod, state, Some(detail));
            }
        }
    }

    /// What a run continued as new shows of the runs before it (`resume`): their warnings, the
    /// local data lost and the marks overridden, force mode when it had begun, and the pods and
    /// volumes as they were left (a volume whose detach is stuck stays `detach-timed-out`; a pod
    /// keeps its count of evictions). The plan shown next updates them.
    pub fn carry_over(&mut self, resume: &DrainResume) {
        let done = &resume.done_so_far;
        self.warnings.clone_from(&done.warnings);
        self.local_data_lost.clone_from(&done.local_data_lost);
        for text in &done.overridden {
            self.note_overridden(text);
        }
        if let Some(reason) = &done.forced {
            self.mode = DrainMode::Force {
                reason: reason.clone(),
            };
        }
        self.pods.clone_from(&resume.pods);
        self.volumes.clone_from(&resume.volumes);
    }

    /// After a continued run's first look at the node, whose pods are `present`
    /// (`namespace/name`): a pod carried over from the runs before it that is no longer there has
    /// gone (meanwhile, by someone else's hand) and blocks nothing.
    pub fn settle_carried(&mut self, present: &[String]) {
        let gone: Vec<String> = self
            .pods_left()
            .filter(|p| !present.contains(&p.pod))
            .map(|p| p.pod.clone())
            .collect();
        for pod in gone {
            self.set_pod(&pod, PodState::Gone, None);
            self.set_block(&pod, None);
        }
    }

    /// The end of force mode at `at`: a volume waited on and not reattached elsewhere is
    /// force-detached when its disk is among the data disks ARM force-detached, when Azure lists
    /// no data disk on the VM any more (its detach finished after force mode deleted its
    /// VolumeAttachment, before the force detach looked), or, without a disk, when anything was
    /// released here (VolumeAttachments deleted or disks detached); the graceful steps still
    /// pending are closed as skipped.
    pub fn end_force_mode(&mut self, release: &ForceRelease<'_>, at: &str) {
        for volume in &mut self.volumes {
            let released = match &volume.disk_id {
                Some(disk) => {
                    release.azure_holds_none
                        || release
                            .force_detached
                            .iter()
                            .any(|d| d.eq_ignore_ascii_case(disk))
                }
                None => release.released_here,
            };
            let moving = !matches!(
                volume.state,
                VolumeState::Reattached | VolumeState::NotWaitedOn
            );
            if moving && released {
                volume.state = VolumeState::ForceDetached;
            }
        }
        for step in [Step::EvictPods, Step::MoveVolumes] {
            let pending = self
                .run
                .steps
                .iter()
                .any(|p| p.step == step && p.state == StepState::Pending);
            if pending {
                self.run
                    .finish(step, at, Some("skipped: force mode".to_owned()));
            }
        }
    }
}

/// What force mode released, as [`DrainStatus::end_force_mode`] reads it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ForceRelease<'a> {
    /// The data disks ARM force-detached.
    pub force_detached: &'a [String],
    /// Whether anything was released here: VolumeAttachments deleted or disks force-detached.
    pub released_here: bool,
    /// Whether Azure lists no data disk on the VM after force mode (nothing was attached when
    /// the force detach looked, the VM is gone, or the force detach left none).
    pub azure_holds_none: bool,
}

#[cfg(test)]
mod tests;
