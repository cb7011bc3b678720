//! Delete hooks (`pre-drain.delete.hook.nodewright.io/<owner>`,
//! `pre-terminate.delete.hook.nodewright.io/<owner>`) against the local stack:
//!
//! (a) a pre-drain hook holds `machine delete` before its drain: the status shows the hold, the
//!     Node stays schedulable and the VM in place, and the hold outlives the worker (killed with
//!     SIGKILL and started again), until the test removes the annotation; then the delete
//!     completes and nothing of the machine is left;
//! (b) a pre-terminate hook holds it after the drain: the Node is cordoned and its pods gone,
//!     the VM stays while the hook is there, and goes once it is removed;
//! (c) a cancel during a pre-drain hold ends the delete Canceled having changed nothing; a hold
//!     past `--hook-timeout` fails the delete naming the hook and `--skip-hooks` and
//!     leaves the machine as it was; `--skip-hooks` then deletes it despite both hooks, names
//!     them in the result and the status, and never removed them while the Node existed.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::hooks::{HookStage, PRE_DRAIN_PREFIX, PRE_TERMINATE_PREFIX};
use nodewright_model::machine::{DeletedMachine, Outcome, Step, StepState};
use nodewright_tests::Stack;
use nodewright_tests::eventually;
use nodewright_tests::machines::{
    CliResult, KillableWorker, MachineStatusDocument, Sandbox, cli, create_machine, node,
    write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::workloads::{Placement, Workload, Workloads};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{assert_nothing_left, unique_pool};

/// How long a hold, a drain or the rest of a delete may take here (generous: the stack is
/// shared with other tests).
const WAIT: Duration = Duration::from_secs(180);
const POLL: Duration = Duration::from_secs(2);

/// What `machine delete --wait --output json` prints.
#[derive(Debug, Deserialize)]
struct DeleteDocument {
    result: DeletedMachine,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_drain_hook_holds_the_delete_until_its_owner_removes_it() -> Result<()> {
    let mut setup = Setup::new("hd").await?;
    let result = pre_drain(&mut setup).await;
    setup.finish(result).await
}

async fn pre_drain(setup: &mut Setup) -> Result<()> {
    let (stack, machine) = (setup.stack.clone(), setup.machine.clone());
    let (stack, machine) = (&stack, &machine);
    let hook = format!("{PRE_DRAIN_PREFIX}e2e-backup");
    setup.create().await?;
    annotate(
        stack,
        machine,
        &hook,
        Some("backup of the local cache first"),
    )
    .await?;

    setup
        .cli(&["machine", "delete", machine])
        .await?
        .expect_code(0)?;
    let held = setup.await_hold(HookStage::PreDrain, &hook).await?;
    ensure!(
        step_state(&held, Step::PreDrainHooks) == Some(StepState::Running)
            && step_state(&held, Step::Drain) == Some(StepState::Pending),
        "the drain waits behind the hook: {held:?}"
    );
    // A look later the run still holds, the Node is schedulable and the VM in place.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let still = setup.status().await?;
    ensure!(
        still.run_status == "running" && still.status.hold.is_some(),
        "still held after another look: {still:?}"
    );
    let node_object = node(&setup.kube().await?, machine)
        .await?
        .with_context(|| format!("no Node {machine}"))?;
    ensure!(
        !is_cordoned(&node_object),
        "the Node is not cordoned during a pre-drain hold"
    );
    let resources = setup.sandbox.machine_resources(machine).await?;
    ensure!(
        resources.vms.len() == 1,
        "the VM stays while held: {resources:#?}"
    );
    let text = setup.cli(&["machine", "status", machine]).await?;
    ensure!(
        text.stdout.contains("held by pre-drain hooks since") && text.stdout.contains(&hook),
        "machine status shows the hold: {}",
        text.stdout
    );

    // The hold is durable: a worker killed during it, and one started later, hold on.
    setup.worker.kill();
    tokio::time::sleep(Duration::from_secs(12)).await;
    setup.worker.restart()?;
    let resumed = setup.await_hold(HookStage::PreDrain, &hook).await?;
    ensure!(
        resumed.status.hold.as_ref().map(|h| &h.since)
            == still.status.hold.as_ref().map(|h| &h.since),
        "the same hold, since the same time: {resumed:?}"
    );

    annotate(stack, machine, &hook, None).await?;
    let done = setup.await_end().await?;
    ensure!(
        done.run_status == "completed" && done.status.outcome == Outcome::Succeeded,
        "the delete completed once the hook was removed: {done:?}"
    );
    ensure!(done.status.hold.is_none(), "no hold left: {done:?}");
    ensure!(
        done.status
            .steps
            .iter()
            .find(|s| s.step == Step::PreDrainHooks)
            .and_then(|s| s.detail.as_deref())
            .is_some_and(|d| d.contains("until its hooks were removed")),
        "the step says it was held: {done:?}"
    );
    assert_nothing_left(stack, &setup.sandbox, machine).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_terminate_hook_holds_the_vm_delete_after_the_drain() -> Result<()> {
    let setup = Setup::new("ht").await?;
    let workloads = Workloads::create(&setup.stack, "hooks").await?;
    let result = pre_terminate(&setup, &workloads).await;
    workloads.clean_up().await;
    setup.finish(result).await
}

async fn pre_terminate(setup: &Setup, workloads: &Workloads) -> Result<()> {
    let Setup { stack, machine, .. } = setup;
    let hook = format!("{PRE_TERMINATE_PREFIX}e2e-lb");
    setup.create().await?;
    workloads
        .deployment(&Workload::new("web", 2, Placement::node(machine)))
        .await?;
    workloads
        .wait_app_running("web", 2, Some(machine), WAIT)
        .await?;
    annotate(
        stack,
        machine,
        &hook,
        Some("deregister from the load balancer"),
    )
    .await?;

    setup
        .cli(&["machine", "delete", machine])
        .await?
        .expect_code(0)?;
    let held = setup.await_hold(HookStage::PreTerminate, &hook).await?;
    ensure!(
        step_state(&held, Step::PreDrainHooks) == Some(StepState::Done)
            && step_state(&held, Step::Drain) == Some(StepState::Done)
            && step_state(&held, Step::DeleteVm) == Some(StepState::Pending),
        "drained, the VM delete waits behind the hook: {held:?}"
    );
    let node_object = node(&setup.kube().await?, machine)
        .await?
        .with_context(|| format!("no Node {machine}"))?;
    ensure!(
        is_cordoned(&node_object),
        "the drained Node is cordoned during the hold"
    );
    let left = workloads.pods_on(machine).await?;
    ensure!(
        left.is_empty(),
        "the drain moved the pods off the Node: {:?}",
        left.iter().map(|p| &p.metadata.name).collect::<Vec<_>>()
    );
    tokio::time::sleep(Duration::from_secs(12)).await;
    let resources = setup.sandbox.machine_resources(machine).await?;
    ensure!(
        resources.vms.len() == 1,
        "the VM stays while the pre-terminate hook is there: {resources:#?}"
    );
    ensure!(
        setup.status().await?.run_status == "running",
        "still held after another look"
    );

    annotate(stack, machine, &hook, None).await?;
    let done = setup.await_end().await?;
    ensure!(
        done.run_status == "completed" && done.status.outcome == Outcome::Succeeded,
        "the delete completed once the hook was removed: {done:?}"
    );
    assert_nothing_left(stack, &setup.sandbox, machine).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_past_its_timeout_fails_and_skip_hooks_deletes_despite_hooks() -> Result<()> {
    let setup = Setup::new("hs").await?;
    let result = timeout_then_skip(&setup).await;
    setup.finish(result).await
}

async fn timeout_then_skip(setup: &Setup) -> Result<()> {
    let Setup { stack, machine, .. } = setup;
    let pre_drain = format!("{PRE_DRAIN_PREFIX}e2e-audit");
    let pre_terminate = format!("{PRE_TERMINATE_PREFIX}e2e-audit");
    setup.create().await?;
    annotate(stack, machine, &pre_drain, Some("audit")).await?;
    annotate(stack, machine, &pre_terminate, Some("audit")).await?;

    // A cancel during the hold changes nothing.
    setup
        .cli(&["machine", "delete", machine])
        .await?
        .expect_code(0)?;
    setup.await_hold(HookStage::PreDrain, &pre_drain).await?;
    setup
        .cli(&["machine", "cancel", machine, "--wait"])
        .await?
        .expect_code(0)?;
    let canceled = setup.await_end().await?;
    ensure!(
        canceled.status.outcome == Outcome::Canceled
            && canceled.status.hold.is_none()
            && canceled
                .status
                .canceled
                .as_ref()
                .is_some_and(|c| c.at_step == "pre-drain-hooks" && c.undone.is_empty()),
        "canceled during the hold, nothing undone: {canceled:?}"
    );
    let node_object = node(&setup.kube().await?, machine)
        .await?
        .with_context(|| format!("no Node {machine}"))?;
    ensure!(
        !is_cordoned(&node_object),
        "the Node stays schedulable after a cancel during the hold"
    );

    // Bounded: past --hook-timeout the delete fails and the machine stays as it was.
    let timed_out = setup
        .cli(&[
            "machine",
            "delete",
            machine,
            "--hook-timeout",
            "15s",
            "--wait",
        ])
        .await?;
    timed_out.expect_code(3)?;
    let said = format!("{}\n{}", timed_out.stdout, timed_out.stderr);
    for part in [pre_drain.as_str(), "--skip-hooks", "pre-drain-hooks"] {
        ensure!(said.contains(part), "the failure names {part}: {said}");
    }
    let failed = setup.status().await?;
    ensure!(
        failed.status.outcome == Outcome::Failed
            && step_state(&failed, Step::Drain) == Some(StepState::Pending),
        "failed before the drain: {failed:?}"
    );
    let node_object = node(&setup.kube().await?, machine)
        .await?
        .with_context(|| format!("no Node {machine}"))?;
    ensure!(!is_cordoned(&node_object), "the Node was left schedulable");
    let annotations = node_object.metadata.annotations.unwrap_or_default();
    ensure!(
        annotations.contains_key(&pre_drain) && annotations.contains_key(&pre_terminate),
        "nodewright removed no hook: {annotations:?}"
    );
    ensure!(
        setup.sandbox.machine_resources(machine).await?.vms.len() == 1,
        "the VM stays after the timeout"
    );

    // --skip-hooks goes past both and names them.
    let deleted = setup
        .cli(&[
            "machine",
            "delete",
            machine,
            "--skip-hooks",
            "--wait",
            "--output",
            "json",
        ])
        .await?;
    let deleted: DeleteDocument = deleted.expect_code(0)?.parse()?;
    let mut skipped = deleted.result.skipped_hooks.clone();
    skipped.sort();
    ensure!(
        skipped == [pre_drain.clone(), pre_terminate.clone()],
        "the result names the skipped hooks: {deleted:?}"
    );
    ensure!(
        deleted.result.vm_deleted && deleted.result.node_deleted,
        "{deleted:?}"
    );
    let status = setup.status().await?;
    ensure!(
        status.status.skipped_hooks.len() == 2 && status.status.outcome == Outcome::Succeeded,
        "the status names the skipped hooks: {status:?}"
    );
    assert_nothing_left(stack, &setup.sandbox, machine).await
}

/// One test's stack, worker, pool and machine.
struct Setup {
    stack: Stack,
    sandbox: Sandbox,
    task_queue: String,
    worker: KillableWorker,
    pool_file: std::path::PathBuf,
    machine: String,
}

impl Setup {
    async fn new(prefix: &str) -> Result<Self> {
        let stack = Stack::load()?;
        let sandbox = Sandbox::new(&stack)?;
        let task_queue = unique_task_queue("hooks");
        let worker = KillableWorker::start(&stack, &task_queue)?;
        let pool = unique_pool(prefix);
        let pool_file = write_pool_file(&stack, &pool, "5m")?;
        let machine = format!("{pool}-b2c4d");
        Ok(Self {
            stack,
            sandbox,
            task_queue,
            worker,
            pool_file,
            machine,
        })
    }

    async fn kube(&self) -> Result<kube::Client> {
        self.stack.kube_client().await
    }

    async fn cli(&self, args: &[&str]) -> Result<CliResult> {
        cli(&self.stack, &self.task_queue, args).await
    }

    async fn create(&self) -> Result<()> {
        let (stack, task_queue, pool_file, machine) = (
            self.stack.clone(),
            self.task_queue.clone(),
            self.pool_file.clone(),
            self.machine.clone(),
        );
        tokio::task::spawn_blocking(move || {
            create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])
        })
        .await??
        .expect_code(0)?;
        Ok(())
    }

    /// The machine's latest run, as `machine status --output json` prints it.
    async fn status(&self) -> Result<MachineStatusDocument> {
        self.cli(&["machine", "status", &self.machine, "--output", "json"])
            .await?
            .expect_code(0)?
            .parse()
    }

    /// Waits until the delete is held at `stage` by (among others) `hook`.
    async fn await_hold(&self, stage: HookStage, hook: &str) -> Result<MachineStatusDocument> {
        eventually(
            &format!("the delete of {} held by {hook}", self.machine),
            WAIT,
            POLL,
            || async {
                let status = self.status().await?;
                ensure!(
                    status.run_status == "running" || !status.workflow_id.starts_with("delete/"),
                    "the delete ended instead of holding: {status:?}"
                );
                let held = status.workflow_id.starts_with("delete/")
                    && status.status.hold.as_ref().is_some_and(|hold| {
                        hold.stage == stage
                            && hold.hooks.iter().any(|h| h == hook)
                            && hold.since <= hold.until
                    });
                Ok(held.then_some(status))
            },
        )
        .await
    }

    /// Waits until the delete has ended.
    async fn await_end(&self) -> Result<MachineStatusDocument> {
        eventually(
            &format!("the delete of {} to end", self.machine),
            WAIT,
            POLL,
            || async {
                let status = self.status().await?;
                Ok((status.run_status != "running").then_some(status))
            },
        )
        .await
    }

    /// On failure: the worker's log in the error, and the machine removed regardless of its
    /// hooks (a delete in flight cancelled first).
    async fn finish(self, result: Result<()>) -> Result<()> {
        if result.is_err() {
            let _ = self
                .cli(&["machine", "cancel", &self.machine, "--wait"])
                .await;
            let args = ["machine", "delete", &self.machine, "--skip-hooks", "--wait"];
            if let Err(error) = self
                .cli(&args)
                .await
                .and_then(|r| r.expect_code(0).map(|_| ()))
            {
                eprintln!("cleanup: deleting machine {}: {error:#}", self.machine);
            }
        }
        let result = result.with_context(|| format!("worker log:\n{}", self.worker.log_tail()));
        drop(self.worker);
        result
    }
}

/// Sets (`Some(value)`) or removes (`None`) the annotation `key` on the Node `name`.
async fn annotate(stack: &Stack, name: &str, key: &str, value: Option<&str>) -> Result<()> {
    let api: Api<Node> = Api::all(stack.kube_client().await?);
    let mut annotations = Map::new();
    annotations.insert(
        key.to_owned(),
        value.map_or(Value::Null, |v| Value::String(v.to_owned())),
    );
    let patch = json!({ "metadata": { "annotations": annotations } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("annotating Node {name} with {key}"))?;
    Ok(())
}

fn is_cordoned(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}

fn step_state(status: &MachineStatusDocument, step: Step) -> Option<StepState> {
    status
        .status
        .steps
        .iter()
        .find(|s| s.step == step)
        .map(|s| s.state)
}
