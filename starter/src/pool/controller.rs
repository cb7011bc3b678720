//! The pool controller from the command line: `pool apply -f FILE [--dry-run]` starts the
//! pool's PoolController (`pool/<cluster>/<pool>`) or hands the running one the file (the
//! `apply` update, refused with the field and its fix for a bad file); `pool scale`,
//! `pool pause`, `pool resume` and `pool delete [--orphan]` steer it; `pool rollout` and
//! `pool rollback` of a pool it keeps go through it ([`order_rollout`]); `pool status` shows its
//! document when it runs (see [`super::status`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use nodewright_model::controller::{
    ApplyRequest, Changes, ControllerRequest, ControllerResult, DEFAULT_HISTORY_LIMIT,
    DEFAULT_OBSERVE_INTERVAL, DeleteRequest, PoolStatusDocument, RolloutOrder, ScaleRequest,
};
use nodewright_model::{ClusterName, Operation, WorkflowId, limits};
use nodewright_workflows::{PoolControllerWorkflow, search};
use temporalio_client::errors::{WorkflowStartError, WorkflowUpdateError};
use temporalio_client::{
    Client, WorkflowExecuteUpdateOptions, WorkflowGetResultOptions, WorkflowHandle,
    WorkflowIdConflictPolicy, WorkflowQueryOptions, WorkflowSignalOptions, WorkflowStartOptions,
};
use temporalio_common::search_attributes::SearchAttributes;

use super::{error_chain, flags, history, who};
use crate::{CliError, Output, pool_file, settings::Settings};

/// How long an update may take to be accepted (it needs a worker).
const UPDATE_TIMEOUT: Duration = Duration::from_secs(30);

/// The flags of `pool apply -f FILE`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The Pool file (YAML, `kind: Pool`).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: PathBuf,
    /// Only print what would change; start and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Start the controller paused (it observes and reports, acts on nothing).
    #[arg(long)]
    paused: bool,
    /// How often the controller lists the pool's VMs when nothing else makes it look (e.g. 5s;
    /// at most 1h). Used when the controller starts.
    #[arg(long, hide = true, value_name = "DURATION",
          default_value_t = DEFAULT_OBSERVE_INTERVAL.into(), value_parser = flags::observe_interval)]
    observe_interval: humantime::Duration,
    /// History events after which the controller continues as a new run (at most 4000).
    #[arg(long, hide = true, value_name = "N", default_value_t = DEFAULT_HISTORY_LIMIT,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(limits::MAX_HISTORY_LIMIT)))]
    history_limit: u32,
}

/// The flags of `pool scale POOL --replicas N`.
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// The pool's name.
    pool: String,
    /// The new number of machines.
    #[arg(long, value_name = "N")]
    replicas: u32,
}

/// The flags of `pool delete POOL`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The pool's name.
    pool: String,
    /// End the controller and leave every machine as it is.
    #[arg(long)]
    orphan: bool,
    /// Wait until every machine is deleted and the controller has ended.
    #[arg(long)]
    wait: bool,
}

/// `pool/<cluster>/<pool>`.
pub fn controller_id(cluster: &ClusterName, pool: &str) -> WorkflowId {
    WorkflowId::for_subject(Operation::Pool, cluster, pool)
}

type Handle = WorkflowHandle<Client, PoolControllerWorkflow>;

fn handle(client: &Client, workflow_id: &WorkflowId) -> Handle {
    crate::handles::run_handle(client, workflow_id.as_str(), None)
}

/// Whether the pool's controller is running.
pub async fn is_running(client: &Client, workflow_id: &WorkflowId) -> Result<bool, CliError> {
    Ok(history::latest(client, workflow_id)
        .await?
        .is_some_and(|latest| latest.is_running()))
}

fn not_running(pool: &str) -> CliError {
    CliError::RunFailed(format!(
        "no controller of pool {pool} is running; start one with `nodewright pool apply -f FILE`"
    ))
}

/// The client, workflow ID and UI link of the running controller of `pool`; refused (exit 3)
/// when none runs.
pub(super) async fn running_controller(
    settings: &Settings,
    pool: &str,
) -> Result<(Client, WorkflowId, String), CliError> {
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = controller_id(&cluster, pool);
    let link = settings.ui_link(&workflow_id);
    if !is_running(&client, &workflow_id).await? {
        return Err(not_running(pool));
    }
    Ok((client, workflow_id, link))
}

/// `pool apply`: starts the controller, or hands the running one the file.
pub async fn apply(settings: &Settings, output: Output, args: ApplyArgs) -> Result<(), CliError> {
    let pool = pool_file::load(&args.file)?;
    let cluster = settings.cluster()?;
    let request = ControllerRequest {
        cluster: cluster.clone(),
        pool: pool.clone(),
        paused: args.paused,
        observe_interval: *args.observe_interval,
        history_limit: args.history_limit,
        carried: None,
    };
    request.check()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = controller_id(&cluster, &pool.name);
    let link = settings.ui_link(&workflow_id);
    if is_running(&client, &workflow_id).await? {
        let update = ApplyRequest {
            pool,
            dry_run: args.dry_run,
        };
        let changes = run_update(&client, &workflow_id, &request.pool.name, |h| async move {
            h.execute_update(
                PoolControllerWorkflow::apply,
                update,
                WorkflowExecuteUpdateOptions::default(),
            )
            .await
        })
        .await?;
        return print_changes(output, &workflow_id, &link, args.dry_run, false, &changes);
    }
    let changes = Changes {
        replicas: Some((0, request.pool.replicas)),
        template: None,
        settings: Vec::new(),
    };
    if args.dry_run {
        return print_changes(output, &workflow_id, &link, true, true, &changes);
    }
    let options = WorkflowStartOptions::new(settings.task_queue.clone(), workflow_id.to_string())
        .id_conflict_policy(WorkflowIdConflictPolicy::Fail)
        .search_attributes(SearchAttributes::new([
            search::CLUSTER.value_set(cluster.to_string()),
            search::POOL.value_set(request.pool.name.clone()),
            search::OPERATION.value_set(Operation::Pool.to_string()),
        ]))
        .static_summary(format!(
            "Keep pool {}: {} machines of template {}",
            request.pool.name, request.pool.replicas, request.pool.template_hash
        ))
        .build();
    client
        .start_workflow(PoolControllerWorkflow::run, request, options)
        .await
        .map_err(|error| match error {
            WorkflowStartError::AlreadyStarted { .. } => CliError::AlreadyRunning(format!(
                "{workflow_id} started meanwhile; apply the file again to hand it the change"
            )),
            other => CliError::RunFailed(format!(
                "starting {workflow_id} failed: {}",
                error_chain(&other)
            )),
        })?;
    print_changes(output, &workflow_id, &link, false, true, &changes)
}

fn print_changes(
    output: Output,
    workflow_id: &WorkflowId,
    link: &str,
    dry_run: bool,
    starts: bool,
    changes: &Changes,
) -> Result<(), CliError> {
    match output {
        Output::Json => println!(
            "{}",
            serde_json::json!({
                "workflowId": workflow_id.as_str(), "dryRun": dry_run, "started": starts && !dry_run,
                "changes": changes, "lines": changes.lines(), "ui": link,
            })
        ),
        Output::Text => {
            let head = match (starts, dry_run) {
                (true, true) => format!("would start {workflow_id}"),
                (true, false) => format!("started {workflow_id}"),
                (false, true) => format!("{workflow_id} would change"),
                (false, false) => format!("{workflow_id} takes the file"),
            };
            println!("{head}");
            for line in changes.lines() {
                println!("  {line}");
            }
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}

/// Runs an update on the running controller of `pool`; a change its validator refuses is
/// invalid input (exit 2) with the controller's reason.
pub(super) async fn run_update<T, F, Fut>(
    client: &Client,
    workflow_id: &WorkflowId,
    pool: &str,
    send: F,
) -> Result<T, CliError>
where
    F: FnOnce(Handle) -> Fut,
    Fut: std::future::Future<Output = Result<T, WorkflowUpdateError>>,
{
    let update = send(handle(client, workflow_id));
    match tokio::time::timeout(UPDATE_TIMEOUT, update).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(WorkflowUpdateError::Failed(failure))) => Err(CliError::InvalidInput(format!(
            "{workflow_id} refused the change: {}; the pool stays as it was",
            failure.message
        ))),
        Ok(Err(WorkflowUpdateError::NotFound(_))) => Err(not_running(pool)),
        Ok(Err(other)) => Err(CliError::RunFailed(format!(
            "asking {workflow_id} failed: {}",
            error_chain(&other)
        ))),
        Err(_) => Err(CliError::RunFailed(format!(
            "{workflow_id} did not accept the change within {}s: is nodewright-worker running? The change may still apply when a worker picks it up; check with `nodewright pool status {pool}`",
            UPDATE_TIMEOUT.as_secs()
        ))),
    }
}

/// `pool scale POOL --replicas N`.
pub async fn scale(settings: &Settings, output: Output, args: ScaleArgs) -> Result<(), CliError> {
    let pool = flags::pool_name(&args.pool)?.to_owned();
    if args.replicas > limits::MAX_REPLICAS {
        return Err(CliError::InvalidInput(format!(
            "--replicas {} is more than {}; give from 0 to {}",
            args.replicas,
            limits::MAX_REPLICAS,
            limits::MAX_REPLICAS
        )));
    }
    let (client, workflow_id, link) = running_controller(settings, &pool).await?;
    let request = ScaleRequest {
        replicas: args.replicas,
    };
    let changes = run_update(&client, &workflow_id, &pool, |h| async move {
        h.execute_update(
            PoolControllerWorkflow::scale,
            request,
            WorkflowExecuteUpdateOptions::default(),
        )
        .await
    })
    .await?;
    print_changes(output, &workflow_id, &link, false, false, &changes)
}

/// How long `--wait` waits for the controller to start a rollout it was handed.
const ROLLOUT_START_TIMEOUT: Duration = Duration::from_secs(120);

/// `pool rollout` / `pool rollback` of a pool whose controller runs: hands the controller the
/// order (validated there: refused with its reason, exit 2), says what changes, and with
/// `wait` follows the rollout the controller starts.
pub async fn order_rollout(
    settings: &Settings,
    output: Output,
    client: &Client,
    controller: &WorkflowId,
    order: RolloutOrder,
    wait: bool,
) -> Result<(), CliError> {
    let cluster = settings.cluster()?;
    let pool = order.pool.name.clone();
    let template_hash = order.pool.template_hash.clone();
    let rollout = super::rollout_id(&cluster, &pool);
    let link = settings.ui_link(&rollout);
    let before = history::latest(client, &rollout).await?.map(|l| l.run_id);
    let changes = run_update(client, controller, &pool, |h| async move {
        h.execute_update(
            PoolControllerWorkflow::rollout,
            order,
            WorkflowExecuteUpdateOptions::default(),
        )
        .await
    })
    .await?;
    match output {
        Output::Json if !wait => println!(
            "{}",
            serde_json::json!({
                "workflowId": rollout.as_str(), "controller": controller.as_str(), "pool": pool,
                "templateHash": template_hash, "changes": changes, "lines": changes.lines(),
                "ui": link,
            })
        ),
        Output::Json => {}
        Output::Text => {
            eprintln!("{controller} takes the rollout: it starts {rollout} at its next look");
            for line in changes.lines() {
                eprintln!("  {line}");
            }
            eprintln!("  follow it: nodewright pool rollout status {pool}   or   {link}");
        }
    }
    if !wait {
        return Ok(());
    }
    let run_id = started_run(client, &rollout, before.as_deref()).await?;
    super::follow::follow(client, Some(&run_id), output, &rollout, &pool, &link).await
}

/// The run of `rollout` the controller starts after `before` (the latest run before the order).
async fn started_run(
    client: &Client,
    rollout: &WorkflowId,
    before: Option<&str>,
) -> Result<String, CliError> {
    let deadline = tokio::time::Instant::now() + ROLLOUT_START_TIMEOUT;
    loop {
        if let Some(latest) = history::latest(client, rollout).await?
            && Some(latest.run_id.as_str()) != before
        {
            return Ok(latest.run_id);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CliError::RunFailed(format!(
                "the controller took the rollout but {rollout} has not started within {}s; see `nodewright pool status` for why (is a worker running?)",
                ROLLOUT_START_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// `pool pause POOL` / `pool resume POOL`.
pub async fn pause(
    settings: &Settings,
    output: Output,
    pool: &str,
    paused: bool,
) -> Result<(), CliError> {
    let pool = flags::pool_name(pool)?;
    let (client, workflow_id, link) = running_controller(settings, pool).await?;
    let by = who();
    let h = handle(&client, &workflow_id);
    let sent = if paused {
        h.signal(
            PoolControllerWorkflow::pause,
            by.clone(),
            WorkflowSignalOptions::default(),
        )
        .await
    } else {
        h.signal(
            PoolControllerWorkflow::resume,
            by.clone(),
            WorkflowSignalOptions::default(),
        )
        .await
    };
    sent.map_err(|error| {
        CliError::RunFailed(format!(
            "signalling {workflow_id} failed: {}",
            error_chain(&error)
        ))
    })?;
    let word = if paused { "pause" } else { "resume" };
    let meaning = if paused {
        "it observes and reports, and acts on nothing; runs in flight finish"
    } else {
        "it acts again"
    };
    match output {
        Output::Json => println!(
            "{}",
            serde_json::json!({ "workflowId": workflow_id.as_str(), "signal": word, "by": by, "ui": link })
        ),
        Output::Text => {
            println!("asked {workflow_id} to {word} (as {by}): {meaning}");
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}

/// `pool delete POOL [--orphan] [--wait]`.
pub async fn delete(settings: &Settings, output: Output, args: DeleteArgs) -> Result<(), CliError> {
    let pool = flags::pool_name(&args.pool)?.to_owned();
    let (client, workflow_id, link) = running_controller(settings, &pool).await?;
    let request = DeleteRequest {
        orphan: args.orphan,
    };
    run_update(&client, &workflow_id, &pool, |h| async move {
        h.execute_update(
            PoolControllerWorkflow::delete,
            request,
            WorkflowExecuteUpdateOptions::default(),
        )
        .await
    })
    .await?;
    let meaning = if args.orphan {
        "the controller ends and leaves every machine as it is"
    } else {
        "every machine is drained and deleted, then the controller ends"
    };
    let ended: Option<ControllerResult> = if args.wait {
        let options = WorkflowGetResultOptions::builder()
            .follow_runs(true)
            .build();
        let result = handle(&client, &workflow_id)
            .get_result(options)
            .await
            .map_err(|error| {
                CliError::RunFailed(format!(
                    "{workflow_id} {}; see {link}",
                    crate::handles::no_result(&error)
                ))
            })?;
        Some(result)
    } else {
        None
    };
    match output {
        Output::Json => println!(
            "{}",
            serde_json::json!({
                "workflowId": workflow_id.as_str(), "orphan": args.orphan,
                "result": ended, "ui": link,
            })
        ),
        Output::Text => {
            println!("asked {workflow_id} to delete pool {pool}: {meaning}");
            if let Some(result) = &ended {
                println!("  ended {}", result.ended);
            }
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}

/// The running controller's status document, or why there is none; `None` when no controller
/// of the pool runs.
pub async fn running_status(
    client: &Client,
    workflow_id: &WorkflowId,
) -> Result<Option<Result<PoolStatusDocument, String>>, CliError> {
    if !is_running(client, workflow_id).await? {
        return Ok(None);
    }
    let h = handle(client, workflow_id);
    let answer = crate::handles::answer(h.query(
        PoolControllerWorkflow::status,
        (),
        WorkflowQueryOptions::default(),
    ))
    .await;
    Ok(Some(answer.and_then(|document| {
        document.ok_or_else(|| "the controller has not looked at the pool yet".to_owned())
    })))
}
