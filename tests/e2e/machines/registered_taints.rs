//! A Node registers with its template's taints (issue 32, item 9): the pool's bootstrap says
//! `<<REGISTER_WITH_TAINTS>>`, CreateMachine fills in `--register-with-taints=dedicated=e2e:NoSchedule`,
//! and the sandbox's node joiner (the kubelet of this stack) creates the Node with that taint. The
//! Node's first version, as a watch started before the create sees it added, already carries the
//! taint: no moment in which a pod without the toleration could be scheduled there.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, WatchEvent, WatchParams};
use nodewright_tests::Stack;
use nodewright_tests::machines::{KillableWorker, Sandbox, create_machine, write_pool_file};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::{assert_nothing_left, unique_pool};

#[tokio::test]
async fn a_node_registers_with_the_template_taints() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let kube = stack.kube_client().await?;
    let task_queue = unique_task_queue("regtaint");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = unique_pool("r");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-r7g2t");

    let nodes: kube::Api<Node> = kube::Api::all(kube.clone());
    let by_name = format!("metadata.name={machine}");
    let version = nodes
        .list(&ListParams::default().fields(&by_name))
        .await?
        .metadata
        .resource_version
        .context("a list's resourceVersion")?;
    let mut stream = nodes
        .watch(&WatchParams::default().fields(&by_name), &version)
        .await?
        .boxed();

    let create = {
        let (stack, task_queue, machine) = (stack.clone(), task_queue.clone(), machine.clone());
        tokio::task::spawn_blocking(move || {
            create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])
        })
    };
    let first = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(event) = stream.next().await {
            match event? {
                WatchEvent::Added(node) => return Ok(node),
                WatchEvent::Error(error) => bail!("watching Node {machine}: {error}"),
                _ => {}
            }
        }
        bail!("the watch of Node {machine} ended before it was added")
    })
    .await
    .with_context(|| format!("Node {machine} was not added within 120 s"))??;

    let taints = first.spec.and_then(|s| s.taints).unwrap_or_default();
    ensure!(
        taints.iter().any(|t| t.key == "dedicated"
            && t.value.as_deref() == Some("e2e")
            && t.effect == "NoSchedule"),
        "Node {machine} was added without dedicated=e2e:NoSchedule: {taints:?}"
    );

    // The create finishes well; then the machine goes.
    create
        .await??
        .expect_code(0)
        .with_context(|| worker.log_tail())?;
    let done = nodewright_tests::machines::CliResult::run(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--wait", "--skip-drain"],
    )?;
    done.expect_code(0).with_context(|| worker.log_tail())?;
    assert_nothing_left(&stack, &sandbox, &machine).await
}
