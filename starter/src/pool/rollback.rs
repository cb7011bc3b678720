//! `nodewright pool rollback POOL [--wait] [--max-surge X] [--max-unavailable Y]`: a rollout to
//! the revision before the current one, as the pool's revisions in the cluster record it
//! ([`rollback_to_revision`]); for a pool rolled only before revisions were kept, to the
//! template its newest completed rollout recorded ([`rollback_of`]).

use nodewright_model::pool::{MachineTemplate, ValidPool, template_hash};
use nodewright_model::rollout::{
    NoRollback, PoolHistory, Revision, Revisions, RolloutOutcome, RolloutResult, TemplateRecord,
};

use super::rollout::{Start, begin, refuse_if_running};
use super::{RollbackArgs, flags, history, revisions, rollout_id};
use crate::{CliError, Output, settings::Settings};

/// How long reading the revisions (InspectPool) may take, in seconds.
const READ_TIMEOUT: u64 = 60;

/// What a rollback rolls to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollback {
    /// The pool with the earlier template.
    pub pool: ValidPool,
    /// The history the rollback carries.
    pub history: PoolHistory,
    /// The template the pool is rolled back from.
    pub from: String,
}

/// The rollback of `pool` by its `revisions`: to the highest-numbered revision below the current
/// one that completed at least once, with the current revision's replicas, strategy, drain and
/// timeouts and the target's template. A target whose inline bootstrap the revisions left out
/// takes its whole template from `recovered` (read from the run that completed it), which must
/// have the target's hash.
///
/// # Errors
///
/// No such revision, or a target whose template could not be recovered (exit 2): the message
/// says why.
pub fn rollback_to_revision(
    pool: &str,
    revisions: &Revisions,
    recovered: Option<&MachineTemplate>,
) -> Result<Rollback, CliError> {
    let target = revisions
        .rollback_target()
        .map_err(|refusal| CliError::InvalidInput(refusal.message(pool)))?;
    let Some(current) = revisions.current() else {
        return Err(CliError::InvalidInput(NoRollback::Nothing.message(pool)));
    };
    let template = if target.bootstrap_omitted {
        match recovered {
            Some(template) if template_hash(template) == target.template_hash => template.clone(),
            Some(template) => {
                return Err(unrecoverable(
                    pool,
                    target,
                    &format!(
                        "the run's template has hash {}, not {}",
                        template_hash(template),
                        target.template_hash
                    ),
                ));
            }
            None => return Err(unrecoverable(pool, target, "no such run is recorded")),
        }
    } else {
        target.pool.template.clone()
    };
    let mut to = current.pool.clone();
    to.template = template.clone();
    to.template_hash = target.template_hash.clone();
    Ok(Rollback {
        pool: to,
        history: PoolHistory {
            current: Some(TemplateRecord {
                template_hash: current.template_hash.clone(),
                template: current.pool.template.clone(),
            }),
            previous: Some(TemplateRecord {
                template_hash: target.template_hash.clone(),
                template,
            }),
        },
        from: current.template_hash.clone(),
    })
}

/// The refusal when a target's inline bootstrap cannot be recovered.
pub fn unrecoverable(pool: &str, target: &Revision, why: &str) -> CliError {
    let run = target.completed_run_id.as_deref().unwrap_or("none");
    CliError::InvalidInput(format!(
        "revision {} of pool {pool} (template {}) gives its bootstrap inline, which nodewright does not keep in the cluster (it may hold a credential), and the run that completed it ({} run {run}) cannot give it back: {why}; roll that template's pool file out with `nodewright pool rollout --pool FILE`, or give the bootstrap by bootstrapSecretRef or bootstrapKeyVaultSecret so that a rollback never needs Temporal's retention; nothing was started",
        target.number, target.template_hash, target.workflow_id
    ))
}

/// The whole template of `target` (whose inline bootstrap the revisions left out), from the
/// result of the run that completed it; `None` when there is none to read.
///
/// # Errors
///
/// The run could not be read (past the namespace's retention, or not completed).
async fn recover_template(
    client: &temporalio_client::Client,
    workflow_id: &nodewright_model::WorkflowId,
    pool: &str,
    target: &Revision,
) -> Result<Option<MachineTemplate>, CliError> {
    if !target.bootstrap_omitted {
        return Ok(None);
    }
    let Some(run_id) = &target.completed_run_id else {
        return Ok(None);
    };
    let handle = super::rollout_handle(client, workflow_id, Some(run_id));
    let options = temporalio_client::WorkflowGetResultOptions::builder()
        .follow_runs(false)
        .build();
    let result: RolloutResult = handle.get_result(options).await.map_err(|error| {
        unrecoverable(
            pool,
            target,
            &format!("reading its result failed: {}", crate::error_chain(&error)),
        )
    })?;
    Ok(Some(result.pool.template))
}

/// The rollback of `pool` from its newest completed rollout's result (pools rolled before
/// revisions were kept in the cluster).
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
    let read = revisions::read(settings, &client, &cluster, pool, READ_TIMEOUT).await?;
    let (rollback, source) = if read.revisions.entries.is_empty() {
        // Rolled only before revisions were kept: the newest completed run's result.
        let last = history::last_completed(&client, &workflow_id).await?;
        let run = last.as_ref().map(|l| l.run_id.clone()).unwrap_or_default();
        let rollback = rollback_of(pool, last.as_ref().map(|l| &l.result))?;
        (
            rollback,
            format!("recorded by run {run} of {workflow_id}; no revision in the cluster yet"),
        )
    } else {
        let target = read
            .revisions
            .rollback_target()
            .map_err(|refusal| CliError::InvalidInput(refusal.message(pool)))?;
        let recovered = recover_template(&client, &workflow_id, pool, target).await?;
        let rollback = rollback_to_revision(pool, &read.revisions, recovered.as_ref())?;
        let numbers = |hash: &str| {
            read.revisions
                .entries
                .iter()
                .find(|e| e.template_hash == hash)
                .map_or(0, |e| e.number)
        };
        let source = format!(
            "revision {} to revision {}, as ConfigMap {} records",
            numbers(&rollback.from),
            numbers(&rollback.pool.template_hash),
            read.config_map
        );
        (rollback, source)
    };
    let Rollback {
        pool: mut target,
        history,
        from,
    } = rollback;
    target.strategy = args
        .budget
        .apply(&target.strategy, "the current revision's")?;
    if output == Output::Text {
        eprintln!(
            "rolling pool {pool} back from template {from} to {} ({source})",
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

    #[test]
    fn by_revisions_it_rolls_to_the_target_template_with_the_current_pool() {
        use nodewright_model::rollout::{
            RevisionChange, RevisionOutcome, RolloutEnd, RolloutStart,
        };
        let mut revisions = Revisions::default();
        for (hash, replicas) in [("aaa", 2), ("bbb", 5)] {
            let mut rolled = pool(hash);
            rolled.replicas = replicas;
            let start = RolloutStart {
                pool: rolled,
                workflow_id: "rollout/dev/workers".to_owned(),
                run_id: hash.to_owned(),
                rollback: false,
                at: 0,
            };
            revisions = revisions.apply(&RevisionChange::Started(start.clone()));
            revisions = revisions.apply(&RevisionChange::Ended(RolloutEnd {
                start,
                outcome: RevisionOutcome::Completed,
                at: 1,
            }));
        }
        // The example pool gives its bootstrap inline: the revisions left it out.
        let error = rollback_to_revision("workers", &revisions, None).expect_err("no template");
        assert!(
            error.to_string().contains("gives its bootstrap inline"),
            "{error}"
        );
        let mut wrong = pool("aaa").template;
        wrong.vm_size = "Standard_other".to_owned();
        assert!(rollback_to_revision("workers", &revisions, Some(&wrong)).is_err());
        let mut recovered = pool("aaa");
        recovered.template_hash = template_hash(&recovered.template);
        for entry in &mut revisions.entries {
            if entry.template_hash == "aaa" {
                entry.template_hash = recovered.template_hash.clone();
            }
        }
        let rollback = rollback_to_revision("workers", &revisions, Some(&recovered.template))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rollback.pool.template_hash, recovered.template_hash);
        assert_eq!(rollback.pool.template.vm_size, "Standard_aaa");
        assert!(
            rollback.pool.template.bootstrap.is_some(),
            "the recovered inline text"
        );
        assert_eq!(rollback.pool.replicas, 5, "the current revision's replicas");
        assert_eq!(rollback.from, "bbb");
        let none = rollback_to_revision("workers", &Revisions::default(), None).expect_err("none");
        assert!(matches!(none, CliError::InvalidInput(_)), "{none}");
    }
}
