//! The Node Lease check: a pool of 3 with `spec.health.leaseTimeout: 20s` (ladder `[replace]`,
//! `maxUnhealthy: 1`). One Node's Lease in `kube-node-lease` stops being renewed while its
//! `Ready` condition stays True: the test takes the Lease over from kwok, as the sandbox's node
//! joiner does for a stopped VM (another holder, a lease duration of decades, its `renewTime`
//! kept), so kwok no longer renews it and the Node itself is untouched. The controller finds the
//! machine unhealthy for its Lease (the remediation's reason names it), replaces it (its VM
//! deleted, a new machine Ready, back to 3), and the two other machines are untouched.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::KillableWorker;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};

use super::common::{apply, await_status, await_world, controller_pool_file, delete_pool};

const UP: Duration = Duration::from_secs(300);

/// The holder the test gives the Lease it takes over (kwok renews only Leases it holds).
const STOPPER: &str = "nodewright-e2e-lease-stopper";

#[tokio::test]
async fn a_node_whose_lease_is_not_renewed_is_replaced_while_its_ready_condition_holds()
-> Result<()> {
    let stack = Stack::load()?;
    let task_queue = unique_task_queue("ctl-lease");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("cn{}", unique_suffix());
    let health =
        "  health:\n    leaseTimeout: 20s\n    maxUnhealthy: 1\n    remediation: [replace]\n";
    let file = controller_pool_file(&stack, &pool, 3, "24.04.1", health)?;
    let leases: Api<Lease> = Api::namespaced(stack.kube_client().await?, "kube-node-lease");
    let mut victim = None;
    let outcome = scenario(&stack, &task_queue, &pool, &file, &leases, &mut victim)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    delete_pool(&stack, &task_queue, &pool).await;
    // The Lease taken over is left when its Node is gone and kwok no longer holds it: delete it.
    if let Some(victim) = victim {
        let nodes: Api<Node> = Api::all(stack.kube_client().await?);
        if matches!(nodes.get_opt(&victim).await, Ok(None))
            && matches!(leases.get_opt(&victim).await, Ok(Some(_)))
            && let Err(error) = leases.delete(&victim, &DeleteParams::default()).await
        {
            eprintln!("cleanup: deleting Lease {victim}: {error}");
        }
    }
    drop(worker);
    outcome
}

/// The status of the Node's `Ready` condition (`True`, `False`, `Unknown`), or `absent`.
fn ready_status(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map_or_else(|| "absent".to_owned(), |c| c.status.clone())
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    file: &std::path::Path,
    leases: &Api<Lease>,
    victim_slot: &mut Option<String>,
) -> Result<()> {
    apply(stack, task_queue, file).await?;
    let first = await_world(stack, pool, "3 Ready machines", UP, |w| w.is_steady(3)).await?;
    let victim = first.vms.iter().next().context("a VM")?.clone();
    *victim_slot = Some(victim.clone());

    // kwok holds (as its own controller id) and renews the Node's Lease; take it over, its
    // renewTime kept.
    let held = eventually(
        &format!("kwok to hold and renew the Lease of {victim}"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let lease = leases.get_opt(&victim).await?;
            Ok(lease.filter(|l| {
                l.spec.as_ref().is_some_and(|s| {
                    s.holder_identity.as_deref().is_some_and(|h| h != STOPPER)
                        && s.renew_time.is_some()
                })
            }))
        },
    )
    .await?;
    let renewed = held
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.clone())
        .context("a renewTime")?;
    let takeover = serde_json::json!({
        "spec": { "holderIdentity": STOPPER, "leaseDurationSeconds": 1_000_000_000 }
    });
    let taken = leases
        .patch(&victim, &PatchParams::default(), &Patch::Merge(&takeover))
        .await?;
    let stopped_at = taken
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.clone())
        .context("a renewTime after the takeover")?;
    let kwok = held
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default();
    println!(
        "Lease of {victim} taken over from {kwok}; last renewed {} (read before: {})",
        stopped_at.0, renewed.0
    );

    let found = await_status(
        stack,
        task_queue,
        pool,
        "the machine found unhealthy for its Lease",
        UP,
        |d| {
            d.status
                .remediations
                .iter()
                .any(|r| r.machine == victim && r.reason.contains("Lease"))
        },
    )
    .await?;
    let remediation = found
        .status
        .remediations
        .iter()
        .find(|r| r.machine == victim)
        .context("the remediation")?;
    let nodes: Api<Node> = Api::all(stack.kube_client().await?);
    let ready_then = nodes
        .get_opt(&victim)
        .await?
        .map_or_else(|| "no Node".to_owned(), |n| ready_status(&n));
    println!(
        "{victim}: remediation started at {} ({} s after the last renewal), reason \"{}\"; its Node's Ready condition then: {ready_then}",
        remediation.started_at,
        remediation.started_at - stopped_at.0.as_second(),
        remediation.reason
    );
    ensure!(
        remediation.reason.contains("not renewed since"),
        "the reason does not say the Lease was not renewed: {remediation:?}"
    );

    let healed = await_world(stack, pool, "the machine replaced, back to 3", UP, |w| {
        w.is_steady(3) && !w.vms.contains(&victim) && !w.nodes.contains(&victim)
    })
    .await?;
    let kept: Vec<&String> = first.vms.iter().filter(|vm| **vm != victim).collect();
    ensure!(
        kept.iter().all(|vm| healed.vms.contains(*vm)),
        "the other machines {kept:?} were touched: {healed:?}"
    );
    let status = await_status(stack, task_queue, pool, "no remediation left", UP, |d| {
        d.status.remediations.is_empty() && d.status.ready_replicas == 3
    })
    .await?;
    let deleted: Vec<&str> = status
        .status
        .last_actions
        .iter()
        .filter(|a| a.text.starts_with("deleting machine"))
        .map(|a| a.text.as_str())
        .collect();
    ensure!(
        deleted.len() == 1 && deleted[0].contains(&victim),
        "only {victim} was deleted: {deleted:?}"
    );
    Ok(())
}
