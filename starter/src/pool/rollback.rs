//! `nodewright pool rollback POOL [--wait] [--max-surge X] [--max-unavailable Y]`: a rollout to
//! the revision before the current one, as the pool's revisions in the cluster record it
//! ([`rollback_to_revision`]); when they hold no earlier revision that completed (a pool rolled
//! only before revisions were kept, or only once since), to the template before the current one
//! that its newest completed rollout recorded ([`rollback_of`]).

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

/// The rollback of `pool` from its newest completed rollout's result `last`, when the revisions
/// in the cluster name no target: a pool rolled only before revisions were kept (`current` is
/// `None`), or one whose revisions hold no earlier revision that completed (`current` is their
/// current revision: right after the upgrade, the first rollout recorded only its own template).
///
/// The result's history holds the pool's templates after that run: the template it ran
/// (`current`) and the one before (`previous`). The target is the newest of them that is not
/// what the pool runs now: the revisions' current template, or without revisions the template
/// of that run. So after a completed rollout it is `previous`; after an aborted one (the pool
/// may mix its template and the one before) it is `current`, the template the pool fully ran
/// before, not the one before that; after an aborted rollback recorded in the revisions it is
/// that rollback's target again. The pool's replicas, strategy, drain and timeouts are the
/// revisions' current ones (else that run's).
///
/// # Errors
///
/// No earlier template recorded (exit 2).
pub fn rollback_of(
    pool: &str,
    current: Option<&Revision>,
    last: Option<&RolloutResult>,
) -> Result<Rollback, CliError> {
    let Some(last) = last else {
        return Err(nothing_earlier(
            pool,
            current,
            &format!("no rollout of pool {pool} has completed"),
        ));
    };
    let runs_now = current.map_or(&last.pool.template_hash, |c| &c.template_hash);
    let record = [
        last.history.current.as_ref(),
        last.history.previous.as_ref(),
    ]
    .into_iter()
    .flatten()
    .find(|record| &record.template_hash != runs_now);
    let Some(record) = record else {
        let from = &last.pool.template_hash;
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
        return Err(nothing_earlier(pool, current, &detail));
    };
    let mut target = current.map_or_else(|| last.pool.clone(), |c| c.pool.clone());
    target.template = record.template.clone();
    target.template_hash = record.template_hash.clone();
    Ok(Rollback {
        pool: target,
        history: last.history.clone(),
        from: runs_now.clone(),
    })
}

/// The refusal when neither the revisions (their `current` revision, if any) nor Temporal's
/// newest completed rollout (`detail` says what it holds) name an earlier template.
fn nothing_earlier(pool: &str, current: Option<&Revision>, detail: &str) -> CliError {
    CliError::InvalidInput(match current {
        None => format!(
            "no earlier template recorded for pool {pool}: rollback needs two completed rollouts; {detail}; nothing was started"
        ),
        Some(current) => format!(
            "no earlier revision of pool {pool} to roll back to: rollback needs a template the pool ran before the current one (revision {}, template {}), and neither its revisions (see `nodewright pool history {pool}`) nor Temporal's history name one ({detail}, within the namespace's retention); nothing was started",
            current.number, current.template_hash
        ),
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
    let (rollback, source) = match read.revisions.rollback_target() {
        Ok(target) => {
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
        }
        // No earlier revision recorded (a pool rolled before revisions were kept, or only
        // once since): the newest completed run's result names the template before.
        Err(_) => {
            let last = history::last_completed(&client, &workflow_id).await?;
            let run = last.as_ref().map(|l| l.run_id.clone()).unwrap_or_default();
            let current = read.revisions.current();
            let rollback = rollback_of(pool, current, last.as_ref().map(|l| &l.result))?;
            let recorded = if current.is_some() {
                "no earlier revision in the cluster yet"
            } else {
                "no revision in the cluster yet"
            };
            (
                rollback,
                format!("recorded by run {run} of {workflow_id}; {recorded}"),
            )
        }
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
        let text = format!(
            "rolling pool {pool} back from template {from} to {} ({source})",
            target.template_hash
        );
        let width = super::summary::width_from(std::env::var("COLUMNS").ok().as_deref());
        for line in super::summary::wrap(&text, width, "  ") {
            eprintln!("{line}");
        }
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
        Budget, RevisionChange, RevisionOutcome, RolloutEnd, RolloutPhase, RolloutStart,
        RolloutStatus, StrategyView, TemplateRecord,
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
        let rollback = rollback_of("workers", None, Some(&last)).unwrap_or_else(|e| panic!("{e}"));
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
        let rollback = rollback_of("workers", None, Some(&last)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rollback.pool.template_hash, "bbb");
        assert_eq!(rollback.from, "ccc");
    }

    #[test]
    fn without_an_earlier_template_nothing_starts() {
        let none = rollback_of("workers", None, None).expect_err("nothing completed");
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
        let error = rollback_of("workers", None, Some(&once)).expect_err("one rollout");
        assert!(
            error
                .to_string()
                .contains("rollback needs two completed rollouts"),
            "{error}"
        );
        let aborted_first = result(RolloutOutcome::Aborted, "aaa", PoolHistory::default());
        assert!(rollback_of("workers", None, Some(&aborted_first)).is_err());
    }

    #[test]
    fn by_revisions_it_rolls_to_the_target_template_with_the_current_pool() {
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

    /// A rollout in a case: template, rollback, outcome (`None`: no end written).
    type Rolled = (&'static str, bool, Option<RevisionOutcome>);

    /// The revisions after `rollouts`.
    fn revisions_after(rollouts: &[Rolled]) -> Revisions {
        let mut revisions = Revisions::default();
        for (index, (hash, rollback, outcome)) in rollouts.iter().enumerate() {
            let at = 100 * i64::try_from(index).unwrap_or(0);
            let mut rolled = pool(hash);
            rolled.replicas = 7;
            let start = RolloutStart {
                pool: rolled,
                workflow_id: "rollout/dev/workers".to_owned(),
                run_id: format!("run-{at}"),
                rollback: *rollback,
                at,
            };
            revisions = revisions.apply(&RevisionChange::Started(start.clone()));
            if let Some(outcome) = outcome {
                revisions = revisions.apply(&RevisionChange::Ended(RolloutEnd {
                    start,
                    outcome: *outcome,
                    at: at + 50,
                }));
            }
        }
        revisions
    }

    #[test]
    fn without_an_earlier_revision_it_rolls_to_the_template_temporal_recorded_before_the_current_one()
     {
        use RevisionOutcome::{Aborted as RevAborted, Completed as RevCompleted, Failed};
        let before_bbb = PoolHistory {
            current: Some(record("bbb")),
            previous: Some(record("aaa")),
        };
        // (revisions, newest completed run (outcome, its template), template rolled to, from).
        let table: [(&[Rolled], RolloutOutcome, &str, &str, &str); 4] = [
            // Right after the upgrade: the first rollout recorded only bbb.
            (
                &[("bbb", false, Some(RevCompleted))],
                RolloutOutcome::Completed,
                "bbb",
                "aaa",
                "bbb",
            ),
            // The first rollout after the upgrade failed: back to what the pool ran before it.
            (
                &[("ccc", false, Some(Failed))],
                RolloutOutcome::Completed,
                "bbb",
                "bbb",
                "ccc",
            ),
            // It was aborted (a completed run whose outcome is aborted).
            (
                &[("ccc", false, Some(RevAborted))],
                RolloutOutcome::Aborted,
                "ccc",
                "bbb",
                "ccc",
            ),
            // The rollback to aaa that the first case starts was aborted: to aaa again.
            (
                &[
                    ("bbb", false, Some(RevCompleted)),
                    ("aaa", true, Some(RevAborted)),
                ],
                RolloutOutcome::Aborted,
                "aaa",
                "aaa",
                "bbb",
            ),
        ];
        for (rollouts, outcome, last_to, target, from) in table {
            let revisions = revisions_after(rollouts);
            assert!(revisions.rollback_target().is_err(), "{rollouts:?}");
            let last = result(outcome, last_to, before_bbb.clone());
            let rollback = rollback_of("workers", revisions.current(), Some(&last))
                .unwrap_or_else(|e| panic!("{rollouts:?}: {e}"));
            assert_eq!(
                (rollback.pool.template_hash.as_str(), rollback.from.as_str()),
                (target, from),
                "{rollouts:?}"
            );
            assert_eq!(
                rollback.pool.template,
                record(target).template,
                "the whole template"
            );
            assert_eq!(rollback.pool.replicas, 7, "the current revision's replicas");
        }
        // Nothing earlier anywhere: refused, naming both places.
        let only = revisions_after(&[("aaa", false, Some(RevCompleted))]);
        let once = result(
            RolloutOutcome::Completed,
            "aaa",
            PoolHistory {
                current: Some(record("aaa")),
                previous: None,
            },
        );
        for last in [None, Some(&once)] {
            let error = rollback_of("workers", only.current(), last).expect_err("nothing earlier");
            assert!(matches!(error, CliError::InvalidInput(_)), "{error}");
            assert!(
                error.to_string().starts_with(
                    "no earlier revision of pool workers to roll back to: rollback needs a template the pool ran before the current one (revision 1, template aaa), and neither its revisions"
                ),
                "{error}"
            );
        }
    }
}
