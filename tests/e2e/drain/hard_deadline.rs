//! The hard deadline of an operator's drain: one machine of a pool whose drain has
//! `timeout: 4m` and `terminationGracePeriod: 2m` (carried to `machine drain` by the VM's tag
//! and the Node's annotation) runs two Deployments' pods: `keeper`, annotated
//! `nodewright.io/do-not-disrupt: "true"`, and `web`, under a PodDisruptionBudget allowing no
//! disruption. `machine drain`:
//!
//! - evicts `keeper` at once (an operator's drain is not held by the mark) and names it among
//!   the marks it overrode, in its status and result;
//! - keeps `web` blocked by its budget, its deadline at the hard deadline (2 minutes after
//!   the start, before the 4 minutes of its timeout); `machine extend-drain --by 1h` leaves it
//!   there, with a warning saying so;
//! - at the hard deadline goes to force mode ("terminationGracePeriod 2m passed") and deletes
//!   `web` with grace period 0: the drain completes, `web` gone, the Node cordoned.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_model::disruption::ANNOTATION_DO_NOT_DISRUPT;
use nodewright_model::drain::{DrainMode, DrainedNode, PodState};
use nodewright_tests::Stack;
use nodewright_tests::documents::ResultDocument;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{Placement, Workload, Workloads};

use super::common::{cli, create_machines, delete_machines, drain_pool_file, wait_drain};

const WAIT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn an_operators_drain_evicts_a_marked_pod_naming_it_and_forces_at_the_hard_deadline()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("drain-hard");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let suffix = unique_suffix();
    let pool = format!("dh{suffix}");
    let machine = format!("{pool}-h4r9d");
    let workloads = Workloads::create(&stack, "drain-hard").await?;
    let file = drain_pool_file(
        &stack,
        &pool,
        &[
            ("timeout", "4m"),
            ("pdbRetryInterval", "1s"),
            ("terminationGracePeriod", "2m"),
        ],
    )?;
    let outcome = async {
        create_machines(&stack, &task_queue, &file, std::slice::from_ref(&machine)).await?;
        scenario(&stack, &task_queue, &machine, &suffix, &workloads).await
    }
    .await
    .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    workloads.clean_up().await;
    delete_machines(&stack, &task_queue, std::slice::from_ref(&machine)).await;
    drop(worker);
    outcome
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
    suffix: &str,
    workloads: &Workloads,
) -> Result<()> {
    let (keeper, web) = (format!("keeper-{suffix}"), format!("web-{suffix}"));
    let here = || Placement::node(machine);
    let marked = Workload::new(&keeper, 1, here()).annotate(ANNOTATION_DO_NOT_DISRUPT, "true");
    workloads.deployment(&marked).await?;
    workloads
        .deployment(&Workload::new(&web, 1, here()))
        .await?;
    let keeper_pod = workloads
        .wait_app_running(&keeper, 1, Some(machine), WAIT)
        .await?;
    let web_pod = workloads
        .wait_app_running(&web, 1, Some(machine), WAIT)
        .await?;
    workloads.pod_disruption_budget(&web, &web, 1).await?;
    let namespace = workloads.namespace();
    let key = |pods: &[k8s_openapi::api::core::v1::Pod]| -> Result<String> {
        let name = pods
            .first()
            .and_then(|p| p.metadata.name.clone())
            .context("a pod")?;
        Ok(format!("{namespace}/{name}"))
    };
    let (keeper_key, web_key) = (key(&keeper_pod)?, key(&web_pod)?);
    let named = format!(
        "{keeper_key} ({ANNOTATION_DO_NOT_DISRUPT}): evicted: an operator's drain is not held"
    );

    let args = ["machine", "drain", machine, "--wait", "--output", "json"];
    let drain = cli(stack, task_queue, &args);
    let (drained, observed) = tokio::join!(
        drain,
        observe(stack, task_queue, machine, &keeper_key, &web_key, &named)
    );
    observed?;
    let result: ResultDocument<DrainedNode> = drained?.expect_code(0)?.parse()?;
    ensure!(
        result.result.force_deleted.contains(&web_key)
            && result
                .result
                .overridden
                .iter()
                .any(|o| o.starts_with(&named)),
        "the result: {:?}",
        result.result
    );
    let web_left = workloads.pods_on(machine).await?;
    ensure!(
        !web_left.iter().any(|p| {
            p.metadata.name.as_deref() == web_key.rsplit('/').next()
                && p.metadata.deletion_timestamp.is_none()
        }),
        "web is still on {machine}"
    );
    Ok(())
}

/// Follows the drain while `machine drain --wait` runs: the override named, the extension cut
/// at the hard deadline, force mode there.
async fn observe(
    stack: &Stack,
    task_queue: &str,
    machine: &str,
    keeper_key: &str,
    web_key: &str,
    named: &str,
) -> Result<()> {
    let blocked = wait_drain(
        stack,
        task_queue,
        machine,
        "keeper evicted, web blocked",
        WAIT,
        |doc| {
            let state = |pod: &str| {
                doc.status
                    .pods
                    .iter()
                    .find(|p| p.pod == pod)
                    .map(|p| p.state)
            };
            matches!(state(keeper_key), Some(PodState::Gone | PodState::Evicting))
                && state(web_key) == Some(PodState::Blocked)
        },
    )
    .await?;
    ensure!(
        blocked
            .status
            .overridden
            .iter()
            .any(|o| o.starts_with(named)),
        "the drain does not name the mark it overrode ({named}...): {:?}",
        blocked.status.overridden
    );
    let hard = blocked
        .status
        .hard_deadline
        .clone()
        .context("the drain shows no hard deadline")?;

    ensure!(
        blocked.status.deadline.as_deref() == Some(hard.as_str()),
        "the deadline {:?} is not the hard deadline {hard}, which comes before the timeout",
        blocked.status.deadline
    );

    // An extension stops at the hard deadline (2 minutes leave room for the
    // blocked look and the CLI on a loaded machine: at 40 s a CI run once saw the drain end first).
    cli(
        stack,
        task_queue,
        &["machine", "extend-drain", machine, "--by", "1h"],
    )
    .await?
    .expect_code(0)?;
    let extended = wait_drain(
        stack,
        task_queue,
        machine,
        "the extension's warning",
        WAIT,
        |doc| {
            doc.status
                .warnings
                .iter()
                .any(|w| w.contains("hard deadline"))
                || !doc.is_running()
        },
    )
    .await?;
    ensure!(
        extended.status.deadline.as_deref() == Some(hard.as_str())
            && extended
                .status
                .warnings
                .iter()
                .any(|w| w.contains("hard deadline")),
        "the extension moved the deadline past the hard deadline {hard}, or said nothing: {:?} {:?}",
        extended.status.deadline,
        extended.status.warnings
    );

    // The hard deadline: force mode, web deleted with grace period 0.
    let ended = wait_drain(
        stack,
        task_queue,
        machine,
        "the drain to end",
        WAIT * 2,
        |doc| !doc.is_running(),
    )
    .await?;
    ensure!(
        ended.run_status == "completed",
        "the drain ended {}",
        ended.run_status
    );
    ensure!(
        matches!(&ended.status.mode, DrainMode::Force { reason } if reason.contains("terminationGracePeriod 2m passed")),
        "the drain did not force at the hard deadline: {:?}",
        ended.status.mode
    );
    Ok(())
}
