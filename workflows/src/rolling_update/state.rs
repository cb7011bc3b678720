//! RollingUpdate's in-memory state (what its `status` query answers, the strategy in force, the
//! wake-up counter, the phase last shown) and the trait through which the runbook's mechanics
//! reach it, so that they need not name the workflow type.

use nodewright_model::pool::{RolloutStrategy, ValidPool};
use nodewright_model::rollout::{PoolNode, PoolVm, RolloutStatus, fallback_strategy};

/// What a rollout keeps beside its history.
#[derive(Default)]
pub struct RolloutState {
    /// The status the `status` query answers (set before the first step).
    pub status: Option<RolloutStatus>,
    /// The strategy in force (`set_strategy` changes it).
    pub strategy: Option<RolloutStrategy>,
    /// The pool's replicas when `scale` changed them during the rollout (its controller was
    /// scaled): planned with from the next look.
    pub replicas: Option<u32>,
    /// Bumped by every signal and update, so that the wait wakes up.
    pub wakeups: u64,
    /// The `NodewrightPhase` last set (it is set again only when it changes: every upsert is a
    /// history event).
    pub phase_shown: Option<&'static str>,
    /// The pool's VMs as last listed, and that list's digest (`model::listing`): the next look
    /// asks only for what changed since.
    pub known_vms: Option<(String, Vec<PoolVm>)>,
    /// The pool's Nodes as last listed, and that list's digest.
    pub known_nodes: Option<(String, Vec<PoolNode>)>,
}

impl RolloutState {
    /// The strategy in force, or the fallback before the first step.
    pub fn strategy_in_force(&self) -> RolloutStrategy {
        self.strategy.clone().unwrap_or_else(fallback_strategy)
    }

    /// The replicas in force: `scale`'s, or the request's.
    pub fn replicas_in_force(&self, requested: u32) -> u32 {
        self.replicas.unwrap_or(requested)
    }

    /// The pool as the rollout now rolls it: the request's, with the strategy and replicas in
    /// force.
    pub fn pool_in_force(&self, requested: &ValidPool) -> ValidPool {
        let mut pool = requested.clone();
        if let Some(strategy) = self.strategy.as_ref() {
            pool.strategy = strategy.clone();
        }
        pool.replicas = self.replicas_in_force(pool.replicas);
        pool
    }

    /// Changes the status, once it is set.
    pub fn with_status(&mut self, change: impl FnOnce(&mut RolloutStatus)) {
        if let Some(status) = self.status.as_mut() {
            change(status);
        }
    }
}

/// A workflow whose state holds a [`RolloutState`].
pub trait HasRollout {
    /// The rollout's state.
    fn rollout(&self) -> &RolloutState;
    /// The rollout's state, for changes.
    fn rollout_mut(&mut self) -> &mut RolloutState;
}
