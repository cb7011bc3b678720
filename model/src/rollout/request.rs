//! What RollingUpdate takes and returns, what its signals and updates carry, and the pool's
//! template history that rollback reads.

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use super::phase::RolloutOutcome;
use super::status::{RolloutStatus, StrategyView};
use crate::ClusterName;
use crate::pool::{Amount, MachineTemplate, RolloutStrategy, ValidPool};

/// How often a rollout looks at its pool when nothing else wakes it.
pub const DEFAULT_OBSERVE_INTERVAL: Duration = Duration::from_secs(15);

/// History events after which a rollout continues as a new run (well before Temporal's 10,000
/// limit, and below the 4,096 at which the server starts suggesting it).
pub const DEFAULT_HISTORY_LIMIT: u32 = 2_000;

/// A template the pool ran, kept so that a rollback can roll back to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRecord {
    /// The template's hash (`nodewright.io/template`).
    pub template_hash: String,
    /// The template itself.
    pub template: MachineTemplate,
}

/// The pool's templates as recorded by its last completed rollout.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolHistory {
    /// The template the pool runs (the last completed rollout's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<TemplateRecord>,
    /// The one before it: what `pool rollback` rolls to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<TemplateRecord>,
}

impl PoolHistory {
    /// The history, with `running` as the current template when none is recorded: a pool made
    /// by its controller (no rollout yet) runs the template it was made with, and its first
    /// rollout's result must name it as the one to roll back to.
    pub fn or_running(self, running: TemplateRecord) -> Self {
        if self.current.is_some() {
            self
        } else {
            Self {
                current: Some(running),
                previous: self.previous,
            }
        }
    }

    /// The history after a rollout to `template` completed: it becomes the current template and
    /// the current one (when different) the previous.
    pub fn completed(&self, template: TemplateRecord) -> Self {
        match &self.current {
            Some(current) if current.template_hash == template.template_hash => Self {
                current: Some(template),
                previous: self.previous.clone(),
            },
            current => Self {
                current: Some(template),
                previous: current.clone().or_else(|| self.previous.clone()),
            },
        }
    }
}

/// The input of RollingUpdate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRequest {
    /// The cluster.
    pub cluster: ClusterName,
    /// The pool as it should be: replicas, the new template, strategy, drain and timeouts.
    pub pool: ValidPool,
    /// Replace this many machines, then wait for `approve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<u32>,
    /// The pool's templates before this rollout (from its last completed rollout).
    #[serde(default)]
    pub history: PoolHistory,
    /// Whether this rollout is a rollback (said in the summary).
    #[serde(default)]
    pub rollback: bool,
    /// How often the pool is looked at when nothing else wakes the rollout.
    #[serde(default = "default_observe_interval")]
    pub observe_interval: Duration,
    /// History events after which the rollout continues as a new run.
    #[serde(default = "default_history_limit")]
    pub history_limit: u32,
    /// Set by continue-as-new: where the previous run left off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Box<RolloutStatus>>,
    /// Whether nodewright started this rollout by itself (an image update), not an operator:
    /// `spec.maintenance` with `applyTo: automatic` gates only these.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub automatic: bool,
}

impl RolloutRequest {
    /// How long the rollout waits between looks when nothing wakes it: `observe_interval`
    /// brought within 1 s and [`crate::limits::MAX_OBSERVE_INTERVAL`] (the CLI refuses more; a
    /// request started by other means is clamped rather than trusted).
    pub fn observe_wait(&self) -> Duration {
        self.observe_interval
            .clamp(Duration::from_secs(1), crate::limits::MAX_OBSERVE_INTERVAL)
    }

    /// How long the rollout waits after a look at `at` (Unix seconds) when nothing wakes it:
    /// [`observe_wait`](Self::observe_wait), or less when a machine warming up for
    /// `minReadySeconds` counts available at `next_available_at` ([`crate::rollout::Plan`]'s),
    /// as a Deployment requeues for it; at least 1 s. Without such a machine (always with
    /// `minReadySeconds` 0) it is `observe_wait`.
    pub fn wait_after_look(&self, at: i64, next_available_at: Option<i64>) -> Duration {
        let wait = self.observe_wait();
        match next_available_at {
            Some(then) => {
                let until = u64::try_from(then.saturating_sub(at)).unwrap_or(0).max(1);
                wait.min(Duration::from_secs(until))
            }
            None => wait,
        }
    }
}

fn default_observe_interval() -> Duration {
    DEFAULT_OBSERVE_INTERVAL
}

fn default_history_limit() -> u32 {
    DEFAULT_HISTORY_LIMIT
}

/// The `set_strategy` update: new budgets, applied from the next plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StrategyChange {
    /// A new maxSurge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<Amount>,
    /// A new maxUnavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<Amount>,
}

impl StrategyChange {
    /// `strategy` with this change applied.
    ///
    /// # Errors
    ///
    /// Nothing to change, a budget beyond its bounds (more than
    /// [`crate::limits::MAX_BUDGET_COUNT`] machines or 100%), or both budgets zero (nothing could
    /// ever be replaced): the message names the field and the fix.
    pub fn apply(&self, strategy: &RolloutStrategy) -> Result<RolloutStrategy, String> {
        if self.max_surge.is_none() && self.max_unavailable.is_none() {
            return Err("nothing to change: give --max-surge and/or --max-unavailable".to_owned());
        }
        for (field, amount) in [
            ("maxSurge", self.max_surge),
            ("maxUnavailable", self.max_unavailable),
        ] {
            if let Some(amount) = amount {
                amount
                    .check()
                    .map_err(|problem| format!("{field} {amount} {problem}"))?;
            }
        }
        let mut changed = strategy.clone();
        if let Some(surge) = self.max_surge {
            changed.max_surge = surge;
        }
        if let Some(unavailable) = self.max_unavailable {
            changed.max_unavailable = unavailable;
        }
        if changed.max_surge.is_zero() && changed.max_unavailable.is_zero() {
            return Err(format!(
                "maxSurge {} and maxUnavailable {} are both zero: no machine could ever be replaced; set one of them to at least 1",
                changed.max_surge, changed.max_unavailable
            ));
        }
        Ok(changed)
    }
}

impl RolloutRequest {
    /// The status this rollout's run starts from at `at` (Unix seconds): the previous run's,
    /// after continue-as-new, with the strategy in force; else a fresh one.
    pub fn first_status(&self, at: i64) -> RolloutStatus {
        match &self.resume {
            Some(previous) => {
                let mut status = (**previous).clone();
                status.strategy = StrategyView::of(&self.pool.strategy, self.pool.replicas);
                status
            }
            None => self.fresh_status(at),
        }
    }

    /// The status of this rollout before its first look, starting at `at` (Unix seconds).
    pub fn fresh_status(&self, at: i64) -> RolloutStatus {
        let pool = &self.pool;
        let mut status = RolloutStatus::new(
            &pool.name,
            &pool.template_hash,
            pool.replicas,
            StrategyView::of(&pool.strategy, pool.replicas),
            pool.strategy.max_failures,
            at,
        );
        status.previous_template_hash = self
            .history
            .current
            .as_ref()
            .map(|r| r.template_hash.clone());
        status.canary = self.canary;
        status
    }
}

/// What RollingUpdate returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutResult {
    /// How it ended.
    pub outcome: RolloutOutcome,
    /// The pool the rollout rolled to (with the strategy in force at the end).
    pub pool: ValidPool,
    /// The pool's templates now: after a completed rollout the new template is the current one.
    pub history: PoolHistory,
    /// The last status: counts, machines, failures.
    pub status: RolloutStatus,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::from_yaml;

    fn record(hash: &str) -> TemplateRecord {
        let pool = from_yaml(include_str!("../../../examples/pools/workers.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        TemplateRecord {
            template_hash: hash.to_owned(),
            template: pool.template,
        }
    }

    #[test]
    fn a_pool_without_a_rollout_runs_the_template_it_was_made_with() {
        let made = PoolHistory::default().or_running(record("a"));
        assert_eq!(made.current.map(|r| r.template_hash).as_deref(), Some("a"));
        let rolled = PoolHistory {
            current: Some(record("b")),
            previous: Some(record("a")),
        };
        assert_eq!(rolled.clone().or_running(record("c")), rolled);
        let after = PoolHistory::default()
            .or_running(record("a"))
            .completed(record("b"));
        assert_eq!(
            after.previous.map(|r| r.template_hash).as_deref(),
            Some("a")
        );
    }

    #[test]
    fn a_completed_rollout_moves_the_current_template_to_previous() {
        let empty = PoolHistory::default();
        let first = empty.completed(record("aaa"));
        assert_eq!(
            first.current.as_ref().map(|r| r.template_hash.as_str()),
            Some("aaa")
        );
        assert_eq!(first.previous, None);
        let second = first.completed(record("bbb"));
        assert_eq!(
            second.current.as_ref().map(|r| r.template_hash.as_str()),
            Some("bbb")
        );
        assert_eq!(
            second.previous.as_ref().map(|r| r.template_hash.as_str()),
            Some("aaa")
        );
        // Rolling to the same template again (say after replicas changed) keeps the previous.
        let again = second.completed(record("bbb"));
        assert_eq!(
            again.previous.as_ref().map(|r| r.template_hash.as_str()),
            Some("aaa")
        );
        // A rollback swaps them.
        let back = again.completed(record("aaa"));
        assert_eq!(
            back.current.as_ref().map(|r| r.template_hash.as_str()),
            Some("aaa")
        );
        assert_eq!(
            back.previous.as_ref().map(|r| r.template_hash.as_str()),
            Some("bbb")
        );
    }

    #[test]
    fn a_strategy_change_refuses_nothing_and_zero_budgets() {
        let strategy = RolloutStrategy {
            max_surge: Amount::Count(1),
            max_unavailable: Amount::Count(0),
            max_failures: 3,
            progress_deadline: Duration::from_secs(600),
            min_ready: Duration::ZERO,
            soak: Duration::ZERO,
        };
        let wider = StrategyChange {
            max_surge: Some(Amount::Percent(50)),
            max_unavailable: None,
        }
        .apply(&strategy)
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(wider.max_surge, Amount::Percent(50));
        assert_eq!(wider.max_unavailable, Amount::Count(0));
        assert!(
            StrategyChange::default()
                .apply(&strategy)
                .is_err_and(|e| e.contains("--max-surge"))
        );
        let zero = StrategyChange {
            max_surge: Some(Amount::Count(0)),
            max_unavailable: None,
        };
        assert!(
            zero.apply(&strategy)
                .is_err_and(|e| e.contains("both zero"))
        );
        let huge = StrategyChange {
            max_surge: None,
            max_unavailable: Some(Amount::Count(u32::MAX)),
        };
        assert_eq!(
            huge.apply(&strategy),
            Err("maxUnavailable 4294967295 is more than 1000 machines; give at most 1000 or a percentage (e.g. 25%)".to_owned())
        );
        let over = StrategyChange {
            max_surge: Some(Amount::Percent(250)),
            max_unavailable: None,
        };
        assert!(
            over.apply(&strategy)
                .is_err_and(|e| e.starts_with("maxSurge 250% is more than 100%"))
        );
    }

    #[test]
    fn a_warming_machine_brings_the_next_look_forward_and_nothing_else_does() {
        let pool = from_yaml(include_str!("../../../examples/pools/workers.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        let request = RolloutRequest {
            cluster: ClusterName::parse("cluster", "local").unwrap_or_else(|e| panic!("{e}")),
            pool,
            canary: None,
            history: PoolHistory::default(),
            rollback: false,
            observe_interval: DEFAULT_OBSERVE_INTERVAL,
            history_limit: DEFAULT_HISTORY_LIMIT,
            resume: None,
            automatic: false,
        };
        let table = [
            // (next_available_at after a look at 1000, wait in seconds)
            (None, 15),
            (Some(1_025), 15),
            (Some(1_015), 15),
            (Some(1_007), 7),
            (Some(1_000), 1),
            (Some(900), 1),
            (Some(i64::MIN), 1),
        ];
        for (next, wait) in table {
            assert_eq!(
                request.wait_after_look(1_000, next),
                Duration::from_secs(wait),
                "{next:?}"
            );
        }
    }
}
