//! `nodewright pool rollback POOL [--wait] [--max-surge X] [--max-unavailable Y]`: a rollout to
//! the template the pool ran before, as its newest completed rollout recorded it.

use nodewright_model::pool::ValidPool;
use nodewright_model::rollout::{PoolHistory, RolloutOutcome, RolloutResult};

use super::rollout::{Start, begin, refuse_if_running};
use super::{RollbackArgs, flags, history, rollout_id};
use crate::{CliError, Output, settings::Settings};

/// What a rollback rolls to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollback {
    /// The pool with the earlier template.
    pub pool: ValidPool,
    /// The history the rollback carries (the last rollout's).
    pub history: PoolHistory,
    /// The template the pool is rolled back from.
    pub from: String,
}

/// The rollback of `pool` from its newest completed rollout's result.
///
/// After a rollout that completed, that is `history.previous`. After one that was aborted (the
/// pool may mix its template and the one before), it is `history.current`: the template the
/// pool fully ran before the aborted rollout, not the one before that.
///
/// # Errors
///
/// No earlier template recorded (exit 2).
pub fn rollback_of(pool: &str, last: Option<&RolloutResult>) -> Result<Rollback, CliError> {
    let Some(last) = last else {
        return Err(CliError::InvalidInput(format!(
            "no earlier template recorded for pool {pool}: rollback needs two completed rollouts, and no rollout of pool {pool} has completed; nothing was started"
        )));
    };
    let (record, from) = match last.outcome {
        RolloutOutcome::Completed => (last.history.previous.as_ref(), &last.pool.template_hash),
        RolloutOutcome::Aborted | RolloutOutcome::Canceled => {
            (last.history.current.as_ref(), &last.pool.template_hash)
        }
    };
    let Some(record) = record else {
        let detail = match last.outcome {
            RolloutOutcome::Completed => {
                format!("its only completed rollout rolled it to template {from}")
            }
            RolloutOutcome::Aborted => format!(
                "its last rollout (to template {from}) was aborted and none completed before it"
            ),
            RolloutOutcome::Canceled => format!(
                "its last rollout (to template {from}) was canceled and none completed before it"
            ),
        };
        return Err(CliError::InvalidInput(format!(
            "no earlier template recorded for pool {pool}: rollback needs two completed rollouts; {detail}; nothing was started"
        )));
    };
    let mut target = last.pool.clone();
    target.template = record.template.clone();
    target.template_hash = record.template_hash.clone();
    Ok(Rollback {
        pool: target,
        history: last.history.clone(),
        from: from.clone(),
    })
}

/// Starts the rollback (after the same checks as a rollout) and follows it with `--wait`.
pub async fn run(settings: &Settings, output: Output, args: RollbackArgs) -> Result<(), CliError> {
    let pool = flags::pool_name(&args.pool)?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = rollout_id(&cluster, pool);
    let link = settings.ui_link(&workflow_id);
    refuse_if_running(&client, &workflow_id, pool, &link).await?;
    let last = history::last_completed(&client, &workflow_id).await?;
    let Rollback {
        pool: mut target,
        history,
        from,
    } = rollback_of(pool, last.as_ref().map(|l| &l.result))?;
    target.strategy = args.budget.apply(&target.strategy, "the last rollout's")?;
    if output == Output::Text {
        let run = last.as_ref().map(|l| l.run_id.as_str()).unwrap_or_default();
        eprintln!(
            "rolling pool {pool} back from template {from} to {} (recorded by run {run} of {workflow_id})",
            target.template_hash
        );
    }
    let start = Start {
        pool: target,
        canary: None,
        history,
        rollback: true,
        wait: args.wait,
        knobs: args.knobs,
    };
    begin(settings, output, &client, &cluster, start).await
}

#[cfg(test)]
mod tests {
    use nodewright_model::pool::from_yaml;
    use nodewright_model::rollout::{
        Budget, RolloutPhase, RolloutStatus, StrategyView, TemplateRecord,
    };

    use super::*;

    fn pool(hash: &str) -> ValidPool {
        let mut pool = from_yaml(include_str!("../../../examples/pools/workers.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        pool.template_hash = hash.to_owned();
        pool.template.vm_size = format!("Standard_{hash}");
        pool
    }

    fn record(hash: &str) -> TemplateRecord {
        let pool = pool(hash);
        TemplateRecord {
            template_hash: hash.to_owned(),
            template: pool.template,
        }
    }

    fn result(outcome: RolloutOutcome, to: &str, history: PoolHistory) -> RolloutResult {
        let pool = pool(to);
        RolloutResult {
            outcome,
            status: {
                let budget = Budget {
                    surge: 1,
                    unavailable: 0,
                };
                let strategy = StrategyView {
                    max_surge: pool.strategy.max_surge,
                    max_unavailable: pool.strategy.max_unavailable,
                    budget,
                };
                let mut status = RolloutStatus::new(&pool.name, to, pool.replicas, strategy, 3, 0);
                status.phase = RolloutPhase::Completed;
                status
            },
            pool,
            history,
        }
    }

    #[test]
    fn a_rollback_rolls_to_the_previous_template_with_the_last_pool() {
        let history = PoolHistory {
            current: Some(record("bbb")),
            previous: Some(record("aaa")),
        };
        let last = result(RolloutOutcome::Completed, "bbb", history.clone());
        let rollback = rollback_of("workers", Some(&last)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rollback.pool.template_hash, "aaa");
        assert_eq!(rollback.pool.template.vm_size, "Standard_aaa");
        assert_eq!(rollback.pool.replicas, last.pool.replicas);
        assert_eq!(rollback.history, history);
        assert_eq!(rollback.from, "bbb");
    }

    #[test]
    fn after_an_aborted_rollout_it_rolls_to_the_template_before_it() {
        let history = PoolHistory {
            current: Some(record("bbb")),
            previous: Some(record("aaa")),
        };
        let last = result(RolloutOutcome::Aborted, "ccc", history);
        let rollback = rollback_of("workers", Some(&last)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rollback.pool.template_hash, "bbb");
        assert_eq!(rollback.from, "ccc");
    }

    #[test]
    fn without_an_earlier_template_nothing_starts() {
        let none = rollback_of("workers", None).expect_err("nothing completed");
        assert!(matches!(none, CliError::InvalidInput(_)));
        assert!(
            none.to_string()
                .starts_with("no earlier template recorded for pool workers: rollback needs two completed rollouts"),
            "{none}"
        );
        let once = result(
            RolloutOutcome::Completed,
            "aaa",
            PoolHistory {
                current: Some(record("aaa")),
                previous: None,
            },
        );
        let error = rollback_of("workers", Some(&once)).expect_err("one rollout");
        assert!(
            error
                .to_string()
                .contains("rollback needs two completed rollouts"),
            "{error}"
        );
        let aborted_first = result(RolloutOutcome::Aborted, "aaa", PoolHistory::default());
        assert!(rollback_of("workers", Some(&aborted_first)).is_err());
    }
}
