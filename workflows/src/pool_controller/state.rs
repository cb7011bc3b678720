//! PoolController's in-memory state: the spec in force, what operators asked (pause, delete),
//! the status the `status` query answers, and the wake-up counter that ends a wait.

use nodewright_model::controller::{
    Action, Condition, DeleteRequest, PoolStatusDocument, Remediation,
};
use nodewright_model::pool::ValidPool;
use nodewright_model::rollout::{PoolNode, PoolVm};

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
    /// The pool's VMs as last listed, and that list's digest (`model::listing`).
    pub known_vms: Option<(String, Vec<PoolVm>)>,
    /// The pool's Nodes as last listed or watched, and that list's digest.
    pub known_nodes: Option<(String, Vec<PoolNode>)>,
}
