//! PoolController's in-memory state: the spec in force, what operators asked (pause, delete),
//! the status the `status` query answers, and the wake-up counter that ends a wait.

use nodewright_model::controller::{
    Action, CapacityView, Condition, DeleteRequest, PoolStatusDocument, Remediation, RolloutOptions,
};
use nodewright_model::image::PoolImage;
use nodewright_model::pool::ValidPool;
use nodewright_model::rollout::{PoolHistory, PoolNode, PoolVm, TemplateRecord};

/// What the controller keeps beside its history.
#[derive(Default)]
pub struct ControllerState {
    /// The pool as it should be (`apply` and `scale` change it); none before the run starts.
    pub pool: Option<ValidPool>,
    /// Observe and report only (`pause`, `resume`).
    pub paused: bool,
    /// Who paused or resumed last.
    pub paused_by: Option<String>,
    /// `pool delete` came: every machine goes (or, with `orphan`, the run ends at once).
    pub deleting: Option<DeleteRequest>,
    /// Bumped by every signal and update, so that the wait wakes up.
    pub wakeups: u64,
    /// The status the `status` query answers.
    pub status: Option<PoolStatusDocument>,
    /// The remediations in progress.
    pub remediations: Vec<Remediation>,
    /// The conditions (their transition times are kept while their status holds).
    pub conditions: Vec<Condition>,
    /// The last actions, newest last.
    pub last_actions: Vec<Action>,
    /// Failed creates in a row.
    pub create_failures: u32,
    /// No create before this Unix second.
    pub creates_after: i64,
    /// The controller's rollout is in flight (`rollout` orders are refused meanwhile).
    pub rolling_out: bool,
    /// `pool rollout` / `pool rollback` asked for a rollout that has not started yet.
    pub order: Option<RolloutOptions>,
    /// A rollout to this template ended without completing (aborted, cancelled, failed): the
    /// controller does not start it again on its own.
    pub held_template: Option<String>,
    /// The pool's templates, as the last rollout (or order) left them.
    pub history: PoolHistory,
    /// Someone else's rollout of the pool runs: the controller acts as if it were its own until
    /// this Unix second, then tries to start its own again.
    pub foreign_rollout_until: i64,
    /// The pool's VMs as last listed, and that list's digest (`model::listing`).
    pub known_vms: Option<(String, Vec<PoolVm>)>,
    /// The pool's Nodes as last listed or watched, and that list's digest.
    pub known_nodes: Option<(String, Vec<PoolNode>)>,
    /// What the last headroom check before a batch of creates found (`CapacityAvailable`).
    pub capacity: CapacityView,
    /// The maintenance windows' state in words, when they gate the pool's disruptions.
    pub window: Option<String>,
    /// The pool's image versions (an image written without a concrete version).
    pub image: Option<PoolImage>,
    /// The image's state in words, for the status.
    pub image_words: Option<String>,
    /// The offerings Azure refused for want of room, set aside until their time
    /// (`model::capacity::offering`).
    pub unavailable: Vec<nodewright_model::capacity::Exhausted>,
    /// Spot machines Azure evicted, by zone (carried by continue-as-new).
    pub evictions: std::collections::BTreeMap<String, u32>,
    /// The pool's Spot VMs seen and their zones (`none` without one), kept while the machine
    /// has a VM or a Node: a Node left without its VM was evicted if its VM was Spot.
    pub spot_vms: std::collections::BTreeMap<String, String>,
}

impl ControllerState {
    /// Records `running` (the pool in force before its template changes) as the history's
    /// current template when none is recorded: the rollout's result then names it, and `pool
    /// rollback` can go back to it.
    pub fn remember_running(&mut self, running: &ValidPool) {
        let history = std::mem::take(&mut self.history);
        self.history = history.or_running(TemplateRecord {
            template_hash: running.template_hash.clone(),
            template: running.template.clone(),
        });
    }
}
