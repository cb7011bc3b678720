//! The worker SIGKILLed at the steps of one table, then started again.
//!
//! Each row of [`CASES`] is a distinct step of CreateMachine, DeleteMachine, DrainNode or
//! RollingUpdate (the step `machine status` / `pool rollout status` shows, and the activity,
//! timer or child running there). A case starts its job with the CLI on a worker and pool of its
//! own, holds the run at its step, kills the worker there with SIGKILL, starts it again, lets
//! the run go on, and checks how it ended and what it left. The steps are reached and held by:
//!
//! - **ARM steps** (create, poll, tag, delete, find, force-detach): a sandbox fault rule that
//!   throttles the step's request twice with `Retry-After` (a VM that never joins for
//!   `register-node`, a detach that hangs for a volume's detach); held once the rule fired.
//! - **Kubernetes writes** (`label-node`, DrainNode's `cordon`, `delete-node`, the rollout's
//!   `mark-outdated`) and **wait-ready** (kwok's Ready status update): an [`ApiHold`], a
//!   validating webhook whose endpoint never answers, so the API server refuses exactly that
//!   write with a 500 the activity retries; held once the API server called it. (kwok stops
//!   retrying a refused Ready after five attempts, so that row's release also touches the Node
//!   until it is Ready, as a kubelet's own retries would make it.)
//! - **Pods**: a PodDisruptionBudget allowing no disruption (the PDB retry timer), a pod held
//!   terminating by a finalizer (the wait for pods to go).
//! - **Volumes** (`move-volumes`, `force-drain` of a machine whose StatefulSet pod has an Azure
//!   Disk CSI volume, with a second machine of the pool to move to): the detach hangs, the disk's
//!   reads are throttled (the wait for Azure to release it), no node has room for the pod (the
//!   wait for the volume to attach elsewhere), or the force detach's write is throttled after
//!   `machine force-drain`.
//! - **Rollout controls**: a paused rollout (its observe timer), a canary awaiting approval.
//!
//! The checks: the run's final status as its runbook says, no second VM for any machine, no VM,
//! NIC, disk or Node of a removed machine, every Node of the pool schedulable (a maintenance
//! drain's Node until its uncordon) or gone, and for the volume cases the volume attached to
//! exactly one node (one VolumeAttachment, attached, on the node its pod runs on; the disk
//! `managedBy` that node's VM; never attached on two nodes at once). How long each run took
//! after the restart is printed (a lost step resumes on the new worker after the 15 s heartbeat
//! timeout, a lost Kubernetes write after its 30 s start-to-close, a lost wait within its
//! retry): a figure, not an assertion. `NODEWRIGHT_E2E_CHAOS_ROWS=6,19` runs only those rows.

use nodewright_model::workflow_type;
use std::io::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use nodewright_model::drain::ANNOTATION_DRAIN_POLICY;
use nodewright_model::drain::{DrainMode, PodState, VolumeState};
use nodewright_model::machine::Step;
use nodewright_model::rollout::RolloutPhase;
use nodewright_model::rollout::TAINT_OUTDATED;
use nodewright_tests::admission::{ApiHold, NodeWrites, named};
use nodewright_tests::documents::{DrainLookup, MachineRunDocument, RolloutStatusDocument, shown};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{
    CliResult, KillableWorker, Sandbox, cli, create_machine, node, write_pool_file,
};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::timeline::Timeline;
use nodewright_tests::workloads::{
    Placement, Workload, Workloads, attachments_of, disk_managed_by, is_attached, node_of,
    set_unschedulable, wait_attached,
};
use nodewright_tests::{Stack, eventually};
use serde_json::{Value, json};

use crate::rollout::common::{PoolShape, pool_machines, roll, rollout_pool_file};

/// How many cases run at once (each has its own worker; the machine has 2 cores).
const CONCURRENT: usize = 5;
/// How long a run may take to reach its step, and to end after the restart.
const REACH: Duration = Duration::from_secs(90);
const FINISH: Duration = Duration::from_secs(240);
const POLL: Duration = Duration::from_millis(500);
/// Retry-After of the throttling faults that hold a run at an ARM step.
const HOLD_SECONDS: u64 = 6;
/// The StatefulSet of the volume cases.
const STATEFUL: &str = "db";

/// The job a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    /// `machine create`: ends completed with one Ready machine.
    Create,
    /// `machine create` of a VM Azure refuses (AllocationFailed): ends failed, nothing left.
    FailingCreate,
    /// `machine delete --skip-drain` of a Ready machine: ends completed, nothing left.
    Delete,
    /// `machine delete` (with its drain) of a machine running pods: ends completed, nothing left.
    DrainingDelete,
    /// `machine drain` for maintenance: ends completed, the Node cordoned until `uncordon`.
    Drain,
    /// `machine drain` of a machine A whose StatefulSet pod has a `ReadWriteOnce` Azure Disk CSI
    /// volume, with a machine B of the pool to move to: ends completed, A cordoned until
    /// `uncordon`, the pod running on B with its volume attached there only.
    VolumeDrain,
    /// `pool rollout` of a 2-machine pool to a new template: ends completed, 2 machines of it.
    Rollout,
}

/// What a case's holds are built from.
struct Names<'a> {
    /// The case's machine (a rollout's: none of its machines).
    machine: &'a str,
    pool: &'a str,
    /// The volume cases' PersistentVolume, which is also the disk's name (else empty).
    volume: &'a str,
}

/// What holds the run at its step until the worker has been killed and started again.
#[derive(Debug, Clone, Copy)]
enum Hold {
    /// A sandbox fault rule, removed afterwards.
    Fault(fn(&Names<'_>) -> Value),
    /// An [`ApiHold`] on the Node writes it selects, released afterwards.
    Api(fn(&Names<'_>) -> NodeWrites),
    /// The pods on the machine under a PodDisruptionBudget allowing no disruption; relaxed.
    Budget,
    /// A pod on the machine held terminating by a finalizer; the finalizer removed.
    Finalizer,
    /// The rollout paused once it has a child in flight; resumed.
    Paused,
    /// A canary rollout (`--canary 1`) waiting for approval; approved.
    Canary,
    /// Like [`Hold::Budget`], but `machine force-drain` is sent while no worker runs: the drain
    /// goes on in force mode on the new worker.
    BudgetThenForce,
    /// Like [`Hold::Budget`] with `machine force-drain` sent while the worker runs, and the
    /// sandbox fault rule holding the force mode's step; the rule removed.
    ForcedFault(fn(&Names<'_>) -> Value),
    /// The volume cases' second machine stays cordoned, so the evicted pod has nowhere to go;
    /// uncordoned.
    NoRoom,
}

/// One row of the campaign.
struct Case {
    workflow: &'static str,
    /// The step (as `machine status` / `pool rollout status` show it) the run is in when killed.
    step: &'static str,
    /// What runs at that step (the activity, timer or child) and what holds it there.
    at: &'static str,
    job: Job,
    hold: Hold,
}

/// A throttle of `operation` on the VMs matching `vm`: two answers 429 with Retry-After.
fn throttle(operation: &str, vm: &str) -> Value {
    json!({ "kind": "throttle", "operation": operation, "vm": vm,
            "count": 2, "retry_after": HOLD_SECONDS })
}

/// A throttle of `operation` on the requests whose path matches `path`.
fn throttle_path(operation: &str, path: String) -> Value {
    json!({ "kind": "throttle", "operation": operation, "path": path,
            "count": 2, "retry_after": HOLD_SECONDS })
}

/// The campaign's table: 26 rows, 21 distinct steps, each row a distinct activity or timer.
const CASES: [Case; 26] = [
    // CreateMachine.
    Case {
        workflow: workflow_type::CREATE_MACHINE,
        step: "ensure-nic",
        at: "azure.ensure_nic, NIC PUT throttled",
        job: Job::Create,
        hold: Hold::Fault(|n| throttle_path("nic.put", format!("*/{}-nic", n.machine))),
    },
    Case {
        workflow: workflow_type::CREATE_MACHINE,
        step: "create-vm",
        at: "azure.begin_vm_create, VM PUT throttled",
        job: Job::Create,
        hold: Hold::Fault(|n| throttle("vm.put", n.machine)),
    },
    Case {
        workflow: workflow_type::CREATE_MACHINE,
        step: "provision-vm",
        at: "azure.await_vm, operation polls throttled",
        job: Job::Create,
        hold: Hold::Fault(|n| throttle("operation.status", n.machine)),
    },
    Case {
        workflow: workflow_type::CREATE_MACHINE,
        step: "provision-vm",
        at: "azure.tag_os_disk, disk tags PATCH throttled",
        job: Job::Create,
        hold: Hold::Fault(|n| throttle_path("disk.patch", format!("*/{}-osdisk", n.machine))),
    },
    Case {
        workflow: workflow_type::CREATE_MACHINE,
        step: "register-node",
        at: "kube.await_node_registered, the VM never joins",
        job: Job::Create,
        hold: Hold::Fault(|n| json!({ "kind": "never_joins", "vm": n.machine })),
    },
    Case {
        workflow: workflow_type::CREATE_MACHINE,
        step: "label-node",
        at: "kube.apply_node_metadata, the Node update refused (500)",
        job: Job::Create,
        hold: Hold::Api(|n| {
            NodeWrites::updates(format!(
                "{} && has(object.metadata.annotations) && '{ANNOTATION_DRAIN_POLICY}' in object.metadata.annotations",
                named(n.machine)
            ))
        }),
    },
    Case {
        workflow: workflow_type::CREATE_MACHINE,
        step: "wait-ready",
        at: "kube.await_node_ready, kwok's Ready status update refused (500)",
        job: Job::Create,
        hold: Hold::Api(|n| {
            NodeWrites::status_updates(format!(
                "{} && has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
                named(n.machine)
            ))
        }),
    },
    Case {
        workflow: workflow_type::CREATE_MACHINE,
        step: "compensate",
        at: "azure.begin_vm_delete after AllocationFailed, VM DELETE throttled",
        job: Job::FailingCreate,
        hold: Hold::Fault(|n| throttle("vm.delete", n.machine)),
    },
    // DeleteMachine.
    Case {
        workflow: workflow_type::DELETE_MACHINE,
        step: "drain",
        at: "DrainNode child, PDB retry timer",
        job: Job::DrainingDelete,
        hold: Hold::Budget,
    },
    Case {
        workflow: workflow_type::DELETE_MACHINE,
        step: "delete-vm",
        at: "azure.begin_vm_delete, VM DELETE throttled",
        job: Job::Delete,
        hold: Hold::Fault(|n| throttle("vm.delete", n.machine)),
    },
    Case {
        workflow: workflow_type::DELETE_MACHINE,
        step: "delete-vm",
        at: "azure.await_vm_deletion, operation polls throttled",
        job: Job::Delete,
        hold: Hold::Fault(|n| throttle("operation.status", n.machine)),
    },
    Case {
        workflow: workflow_type::DELETE_MACHINE,
        step: "delete-leftovers",
        at: "azure.find_leftovers, NIC GET throttled",
        job: Job::Delete,
        hold: Hold::Fault(|n| throttle_path("nic.get", format!("*/{}-nic", n.machine))),
    },
    Case {
        workflow: workflow_type::DELETE_MACHINE,
        step: "delete-node",
        at: "kube.delete_node, the Node deletion refused (500)",
        job: Job::Delete,
        hold: Hold::Api(|n| NodeWrites::deletions(named(n.machine))),
    },
    // DrainNode.
    Case {
        workflow: workflow_type::DRAIN_NODE,
        step: "cordon",
        at: "kube.prepare_drain, the cordon refused (500)",
        job: Job::Drain,
        hold: Hold::Api(|n| {
            NodeWrites::updates(format!(
                "{} && has(object.spec.unschedulable) && object.spec.unschedulable",
                named(n.machine)
            ))
        }),
    },
    Case {
        workflow: workflow_type::DRAIN_NODE,
        step: "evict-pods",
        at: "PDB retry timer, then force-drain signalled while no worker runs",
        job: Job::Drain,
        hold: Hold::BudgetThenForce,
    },
    Case {
        workflow: workflow_type::DRAIN_NODE,
        step: "evict-pods",
        at: "kube.await_pods_gone on a pod held by a finalizer",
        job: Job::Drain,
        hold: Hold::Finalizer,
    },
    Case {
        workflow: workflow_type::DRAIN_NODE,
        step: "move-volumes",
        at: "kube.await_volumes_detached, the CSI detach hangs",
        job: Job::VolumeDrain,
        hold: Hold::Fault(
            |n| json!({ "kind": "hang_detach", "operation": "csi.detach", "vm": n.machine }),
        ),
    },
    Case {
        workflow: workflow_type::DRAIN_NODE,
        step: "move-volumes",
        at: "azure.await_disks_released, disk GET throttled",
        job: Job::VolumeDrain,
        hold: Hold::Fault(|n| throttle_path("disk.get", format!("*/disks/{}", n.volume))),
    },
    Case {
        workflow: workflow_type::DRAIN_NODE,
        step: "move-volumes",
        at: "kube.await_volumes_reattached, no node has room for the pod",
        job: Job::VolumeDrain,
        hold: Hold::NoRoom,
    },
    Case {
        workflow: workflow_type::DRAIN_NODE,
        step: "force-drain",
        at: "azure.force_detach_data_disks after force-drain, its write throttled",
        job: Job::VolumeDrain,
        hold: Hold::ForcedFault(|n| throttle("vm.attachDetachDataDisks", n.machine)),
    },
    // RollingUpdate.
    Case {
        workflow: workflow_type::ROLLING_UPDATE,
        step: "create child, create-vm",
        at: "CreateMachine child, VM PUT throttled",
        job: Job::Rollout,
        hold: Hold::Fault(|n| throttle("vm.put", &format!("{}-*", n.pool))),
    },
    Case {
        workflow: workflow_type::ROLLING_UPDATE,
        step: "create child, provision-vm",
        at: "CreateMachine child, operation polls throttled",
        job: Job::Rollout,
        hold: Hold::Fault(|n| throttle("operation.status", &format!("{}-*", n.pool))),
    },
    Case {
        workflow: workflow_type::ROLLING_UPDATE,
        step: "delete child, delete-vm",
        at: "DeleteMachine child, VM DELETE throttled",
        job: Job::Rollout,
        hold: Hold::Fault(|n| throttle("vm.delete", &format!("{}-*", n.pool))),
    },
    Case {
        workflow: workflow_type::ROLLING_UPDATE,
        step: "mark-outdated",
        at: "kube.mark_outdated, the outdated taint refused (500)",
        job: Job::Rollout,
        hold: Hold::Api(|n| {
            NodeWrites::updates(format!(
                "request.name.startsWith('{}-') && has(object.spec.taints) && object.spec.taints.exists(t, t.key == '{TAINT_OUTDATED}')",
                n.pool
            ))
        }),
    },
    Case {
        workflow: workflow_type::ROLLING_UPDATE,
        step: "paused",
        at: "the observe timer of a paused rollout",
        job: Job::Rollout,
        hold: Hold::Paused,
    },
    Case {
        workflow: workflow_type::ROLLING_UPDATE,
        step: "awaiting-approval",
        at: "the wait for approve after a canary of 1",
        job: Job::Rollout,
        hold: Hold::Canary,
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_worker_killed_at_each_step_of_the_table_leaves_a_consistent_world() -> Result<()> {
    let stack = Stack::load()?;
    // NODEWRIGHT_E2E_CHAOS_ROWS=6,7 runs only those rows (to look into one).
    let rows: Option<Vec<usize>> = std::env::var("NODEWRIGHT_E2E_CHAOS_ROWS").ok().map(|list| {
        list.split(',')
            .filter_map(|r| r.trim().parse().ok())
            .collect()
    });
    let runs = futures::stream::iter(CASES.iter().enumerate())
        .filter(|(index, _)| {
            std::future::ready(rows.as_ref().is_none_or(|rows| rows.contains(index)))
        })
        .map(|(index, case)| {
            let stack = stack.clone();
            async move {
                let started = Instant::now();
                let outcome = run_case(&stack, index, case).await;
                (index, case, outcome, started.elapsed())
            }
        })
        .buffer_unordered(CONCURRENT)
        .collect::<Vec<_>>()
        .await;
    let mut sorted = runs;
    sorted.sort_by_key(|(index, ..)| *index);
    // The failures first: a CI log that keeps only the head of the output still shows them.
    let failures: Vec<String> = sorted
        .iter()
        .filter_map(|(index, case, outcome, _)| {
            outcome.as_ref().err().map(|error| {
                format!(
                    "#{index} {} at {} ({}): {error:#}",
                    case.workflow, case.step, case.at
                )
            })
        })
        .collect();
    for failure in &failures {
        let first_lines: Vec<&str> = failure.lines().take(3).collect();
        println!("FAILED {}", first_lines.join(" | "));
        // Also on the process's own stderr, which libtest does not capture: a CI log that
        // keeps only the lines around "... FAILED" still names the row and its error.
        let _ = writeln!(
            std::io::stderr(),
            "chaos::kill FAILED {}",
            first_lines.join(" | ")
        );
    }
    println!(
        "{:<2} {:<14} {:<26} {:<72} result",
        "#", "workflow", "step", "held at"
    );
    for (index, case, outcome, took) in &sorted {
        let result = match outcome {
            Ok(report) => format!("ok ({report}; case {:.0}s)", took.as_secs_f64()),
            Err(_) => format!("FAILED (case {:.0}s)", took.as_secs_f64()),
        };
        println!(
            "{index:<2} {:<14} {:<26} {:<72} {result}",
            case.workflow, case.step, case.at
        );
    }
    ensure!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
    Ok(())
}

/// The table's promise: every row a distinct step and site, 20 distinct steps or more.
#[test]
fn the_table_has_twenty_distinct_steps_and_no_repeated_site() {
    let mut steps: Vec<(&str, &str)> = CASES.iter().map(|c| (c.workflow, c.step)).collect();
    steps.sort_unstable();
    steps.dedup();
    assert!(
        steps.len() >= 20,
        "{} distinct steps: {steps:?}",
        steps.len()
    );
    let mut sites: Vec<(&str, &str, &str)> =
        CASES.iter().map(|c| (c.workflow, c.step, c.at)).collect();
    sites.sort_unstable();
    sites.dedup();
    assert_eq!(sites.len(), CASES.len(), "a row repeats another");
}

/// What a case made, for its checks and its clean-up.
struct Scene {
    stack: Stack,
    task_queue: String,
    pool: String,
    machine: String,
    /// The volume cases' second machine, where the pod goes.
    machine_b: Option<String>,
    sandbox: Sandbox,
    workloads: Option<Workloads>,
    /// The volume cases' PersistentVolume (and disk) name.
    volume: Option<String>,
    /// The volume cases' record of the VolumeAttachments.
    timeline: Option<Timeline>,
    rules: Vec<u64>,
    api_hold: Option<ApiHold>,
}

impl Scene {
    fn names(&self) -> Names<'_> {
        Names {
            machine: &self.machine,
            pool: &self.pool,
            volume: self.volume.as_deref().unwrap_or_default(),
        }
    }
}

async fn run_case(stack: &Stack, index: usize, case: &Case) -> Result<String> {
    let task_queue = unique_task_queue(&format!("chaos{index}"));
    let mut worker = KillableWorker::start(stack, &task_queue)?;
    let pool = format!("k{index}{}", &unique_suffix()[..6]);
    let mut scene = Scene {
        stack: stack.clone(),
        task_queue,
        machine: format!("{pool}-m{index:02}zz"),
        machine_b: (case.job == Job::VolumeDrain).then(|| format!("{pool}-b{index:02}zz")),
        pool,
        sandbox: Sandbox::new(stack)?,
        workloads: None,
        volume: None,
        timeline: None,
        rules: Vec::new(),
        api_hold: None,
    };
    let outcome = campaign_step(&mut scene, &mut worker, case)
        .await
        .with_context(|| format!("worker log:\n{}", worker.log_tail()));
    // The holds first: they would hold the clean-up too.
    if let Some(hold) = scene.api_hold.as_mut()
        && let Err(error) = hold.release().await
    {
        eprintln!("cleanup: releasing the API hold: {error:#}");
    }
    for rule in scene.rules.drain(..) {
        let _ = scene.sandbox.remove_fault(rule).await;
    }
    if let Some(workloads) = &scene.workloads {
        workloads.clean_up().await;
    }
    crate::rollout::common::clean_up_pool(&scene.stack, &scene.task_queue, &scene.pool).await;
    drop(worker);
    outcome
}

/// Set up, hold, kill, restart, release, and check the end.
async fn campaign_step(
    scene: &mut Scene,
    worker: &mut KillableWorker,
    case: &Case,
) -> Result<String> {
    let shape = PoolShape::new(2, "1", "0");
    let v1 = rollout_pool_file(&scene.stack, &scene.pool, &shape)?;
    let v2 = rollout_pool_file(&scene.stack, &scene.pool, &shape.clone().version("24.04.2"))?;
    let machine_file = write_pool_file(&scene.stack, &scene.pool, "5m")?;

    // Set up what the job works on.
    match case.job {
        Job::Create | Job::FailingCreate => {}
        Job::Delete | Job::DrainingDelete | Job::Drain => {
            create(scene, &machine_file, &scene.machine, &["--wait"])
                .await?
                .expect_code(0)?;
        }
        Job::VolumeDrain => place_volume(scene, &machine_file, case.hold).await?,
        Job::Rollout => {
            roll(&scene.stack, &scene.task_queue, &v1, &[]).await?;
        }
    }
    if case.job != Job::VolumeDrain
        && matches!(
            case.hold,
            Hold::Budget | Hold::Finalizer | Hold::BudgetThenForce
        )
    {
        place_pods(scene, case.hold).await?;
    }
    if case.job == Job::FailingCreate {
        let rule = nodewright_tests::machines::allocation_failure(&scene.pool);
        scene.rules.push(scene.sandbox.add_fault(rule).await?);
    }
    if let Hold::ForcedFault(_) = case.hold {
        // Force mode deletes the VolumeAttachments before it force-detaches the disks; were the
        // CSI detach that follows quick, the disk would be gone from the VM before force mode
        // looks (nothing to force-detach, the rule never fires: under load it often was). A
        // hanging detach, the case force detach exists for, keeps it attached until then.
        let machine = scene.machine.clone();
        let hang = json!({ "kind": "hang_detach", "operation": "csi.detach", "vm": machine });
        scene.rules.push(scene.sandbox.add_fault(hang).await?);
    }
    let fault = match case.hold {
        Hold::Fault(rule) | Hold::ForcedFault(rule) => {
            let id = scene.sandbox.add_fault(rule(&scene.names())).await?;
            scene.rules.push(id);
            Some(id)
        }
        _ => None,
    };
    if let Hold::Api(writes) = case.hold {
        let kube = scene.stack.kube_client().await?;
        let (label, writes) = (format!("chaos-{}", scene.pool), writes(&scene.names()));
        let hold = ApiHold::start(&kube, &label, &writes).await?;
        scene.api_hold = Some(hold);
    }

    // Start the job and wait until it is held at its step.
    let machine = scene.machine.clone();
    let started = match case.job {
        Job::Create | Job::FailingCreate => create(scene, &machine_file, &machine, &[]).await?,
        Job::Delete => run(scene, &["machine", "delete", &machine, "--skip-drain"]).await?,
        Job::DrainingDelete => run(scene, &["machine", "delete", &machine]).await?,
        Job::Drain | Job::VolumeDrain => run(scene, &["machine", "drain", &machine]).await?,
        Job::Rollout => {
            let file = v2.to_string_lossy().into_owned();
            let mut args = vec![
                "pool",
                "rollout",
                "--pool",
                file.as_str(),
                "--observe-interval",
                "1s",
            ];
            if matches!(case.hold, Hold::Canary) {
                args.extend(["--canary", "1"]);
            }
            run(scene, &args).await?
        }
    };
    started.expect_code(0)?;
    await_held(scene, case, fault).await?;
    if let Some(timeline) = &scene.timeline {
        timeline.mark("killing the worker");
    }

    // Kill the worker there, start it again, let the run go on.
    worker.kill();
    tokio::time::sleep(Duration::from_secs(1)).await;
    if matches!(case.hold, Hold::BudgetThenForce) {
        run(scene, &["machine", "force-drain", &scene.machine.clone()])
            .await?
            .expect_code(0)?;
    }
    worker.restart()?;
    let restarted = Instant::now();
    release(scene, case, fault).await?;
    let ended = await_end(scene, case.job).await?;
    let after = restarted.elapsed().as_secs_f64();
    check_end(scene, case, &ended).await?;
    Ok(format!("ended {after:.0}s after the restart"))
}

async fn run(scene: &Scene, args: &[&str]) -> Result<CliResult> {
    cli(&scene.stack, &scene.task_queue, args).await
}

/// `machine create` of `machine` from the pool file `file`.
async fn create(
    scene: &Scene,
    file: &std::path::Path,
    machine: &str,
    extra: &[&str],
) -> Result<CliResult> {
    let (stack, task_queue, file, machine) = (
        scene.stack.clone(),
        scene.task_queue.clone(),
        file.to_path_buf(),
        machine.to_owned(),
    );
    let extra: Vec<String> = extra.iter().map(|e| (*e).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        create_machine(&stack, &task_queue, &file, &machine, &extra)
    })
    .await?
}

/// Two pods of a Deployment `web` on the machine: under a budget allowing no disruption, or
/// one of them held by a finalizer.
async fn place_pods(scene: &mut Scene, hold: Hold) -> Result<()> {
    let workloads = Workloads::create(&scene.stack, "chaos").await?;
    workloads
        .deployment(&Workload::new("web", 2, Placement::node(&scene.machine)))
        .await?;
    let pods = workloads
        .wait_app_running("web", 2, Some(&scene.machine), REACH)
        .await?;
    match hold {
        Hold::Finalizer => {
            let name = pods
                .first()
                .and_then(|p| p.metadata.name.clone())
                .context("a pod of web")?;
            let api: Api<Pod> = Api::namespaced(workloads.client().clone(), workloads.namespace());
            let patch = json!({ "metadata": { "finalizers": ["e2e.nodewright.io/hold"] } });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        _ => workloads.pod_disruption_budget("web", "web", 2).await?,
    }
    scene.workloads = Some(workloads);
    Ok(())
}

/// The volume cases: machines A and B of the pool; a StatefulSet of one pod whose volume is an
/// Azure Disk CSI disk, running on A with the volume attached there (B cordoned meanwhile); B
/// uncordoned again unless the case leaves the pod no room. Under [`Hold::ForcedFault`], a
/// budget allowing no disruption of the pod.
async fn place_volume(scene: &mut Scene, file: &std::path::Path, hold: Hold) -> Result<()> {
    let node_b = scene.machine_b.clone().context("the second machine")?;
    let (a, b) = tokio::join!(
        create(scene, file, &scene.machine, &["--wait"]),
        create(scene, file, &node_b, &["--wait"]),
    );
    a?.expect_code(0)?;
    b?.expect_code(0)?;
    let mut workloads = Workloads::create(&scene.stack, "chaos-volume").await?;
    let kube = workloads.client().clone();
    set_unschedulable(&kube, &node_b, true).await?;
    let timeline = Timeline::start(&kube, workloads.namespace(), &workloads.volume_prefix()).await;
    let volumes = workloads
        .stateful_set(&Workload::new(STATEFUL, 1, Placement::pool(&scene.pool)))
        .await;
    // Kept before anything can fail, so the clean-up removes the volume.
    let volumes = match volumes {
        Ok(volumes) => volumes,
        Err(error) => {
            scene.workloads = Some(workloads);
            return Err(error);
        }
    };
    scene.workloads = Some(workloads);
    scene.timeline = Some(timeline?);
    let workloads = scene.workloads.as_ref().context("the workloads")?;
    let volume = volumes.first().context("one volume")?.name.clone();
    workloads
        .wait_app_running(STATEFUL, 1, Some(&scene.machine), REACH)
        .await?;
    wait_attached(&kube, &volume, &scene.machine, REACH).await?;
    if matches!(hold, Hold::ForcedFault(_)) {
        workloads
            .pod_disruption_budget(STATEFUL, STATEFUL, 1)
            .await?;
    }
    if !matches!(hold, Hold::NoRoom) {
        set_unschedulable(&kube, &node_b, false).await?;
    }
    scene.volume = Some(volume);
    Ok(())
}

/// The machine's (or the drain's) status document, or `None` before there is one (the CLI
/// refuses); a document the CLI prints must parse.
async fn machine_status(scene: &Scene) -> Result<Option<MachineRunDocument>> {
    let status = run(
        scene,
        &["machine", "status", &scene.machine, "--output", "json"],
    )
    .await?;
    if status.code != Some(0) {
        return Ok(None);
    }
    Ok(Some(status.parse()?))
}

/// The running step of a machine status document (a create's, a delete's or a drain's).
fn running_step(doc: &MachineRunDocument) -> Option<&'static str> {
    let step = match doc {
        MachineRunDocument::Drain(drain) => drain.status.run.current(),
        MachineRunDocument::Machine(machine) => machine.status.current(),
    };
    step.map(Step::as_str)
}

/// The states of the drain's pods (a delete's drain, or the drain itself); none without one.
fn pod_states(doc: &MachineRunDocument) -> Vec<PodState> {
    doc.drain()
        .map(|drain| drain.pods.iter().map(|p| p.state).collect())
        .unwrap_or_default()
}

/// The state of the volume `pv` in a drain's status document.
fn volume_state(doc: &MachineRunDocument, pv: &str) -> Option<VolumeState> {
    doc.drain()?.volume(pv).map(|v| v.state)
}

/// Whether every pod of the drain is blocked by a budget (at least `pods` of them).
async fn all_blocked(scene: &Scene, pods: usize) -> Result<bool> {
    Ok(machine_status(scene).await?.is_some_and(|doc| {
        let states = pod_states(&doc);
        states.len() >= pods && states.iter().all(|s| *s == PodState::Blocked)
    }))
}

/// The rollout's status document, or `None` before there is one (the CLI refuses); a document
/// the CLI prints must parse.
async fn rollout_doc(scene: &Scene) -> Result<Option<RolloutStatusDocument>> {
    let status = run(
        scene,
        &["pool", "rollout", "status", &scene.pool, "--output", "json"],
    )
    .await?;
    if status.code != Some(0) {
        return Ok(None);
    }
    Ok(Some(status.parse()?))
}

/// The last status of a run that ended: a machine's (or drain's), or a rollout's.
enum Ended {
    /// `machine status`.
    Machine(MachineRunDocument),
    /// `pool rollout status`.
    Rollout(Box<RolloutStatusDocument>),
}

impl Ended {
    /// The machine's status document; fails for a rollout's.
    fn machine(&self) -> Result<&MachineRunDocument> {
        match self {
            Self::Machine(doc) => Ok(doc),
            Self::Rollout(doc) => bail!("a machine's status, not a rollout's: {doc}"),
        }
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Machine(doc) => doc.fmt(f),
            Self::Rollout(doc) => doc.fmt(f),
        }
    }
}

async fn fault_fired(scene: &Scene, id: u64) -> Result<bool> {
    Ok(scene
        .sandbox
        .fault(id)
        .await?
        .is_some_and(|rule| rule["fired"].as_u64() >= Some(1)))
}

/// Waits until the run is held where the case says.
async fn await_held(scene: &Scene, case: &Case, fault: Option<u64>) -> Result<()> {
    if let Hold::ForcedFault(_) = case.hold {
        // Blocked by the budget first; then force mode, which the rule holds.
        eventually(
            "the pod to be blocked by its budget",
            REACH,
            POLL,
            || async { Ok(all_blocked(scene, 1).await?.then_some(())) },
        )
        .await?;
        run(scene, &["machine", "force-drain", &scene.machine])
            .await?
            .expect_code(0)?;
    }
    let volume = scene.volume.as_deref().unwrap_or_default();
    eventually(
        &format!("the run to be held at {}", case.at),
        REACH,
        POLL,
        || async {
            let held = match case.hold {
                Hold::Fault(_) if case.step == "register-node" => machine_status(scene)
                    .await?
                    .is_some_and(|doc| running_step(&doc) == Some("register-node")),
                Hold::Fault(_) | Hold::ForcedFault(_) => match fault {
                    Some(id) => fault_fired(scene, id).await?,
                    None => false,
                },
                // The API server refused the write; for a machine run, while at the case's step
                // (kwok's Ready comes while CreateMachine may still be at an earlier step).
                Hold::Api(_) => {
                    let refused = scene.api_hold.as_ref().is_some_and(|h| h.calls() >= 1);
                    refused
                        && (case.job == Job::Rollout
                            || machine_status(scene)
                                .await?
                                .is_some_and(|doc| running_step(&doc) == Some(case.step)))
                }
                Hold::Budget | Hold::BudgetThenForce => all_blocked(scene, 2).await?,
                Hold::Finalizer => machine_status(scene)
                    .await?
                    .is_some_and(|doc| pod_states(&doc).contains(&PodState::Evicting)),
                Hold::NoRoom => machine_status(scene).await?.is_some_and(|doc| {
                    volume_state(&doc, volume) == Some(VolumeState::Reattaching)
                }),
                Hold::Paused => {
                    let doc = rollout_doc(scene).await?;
                    let in_flight = doc.as_ref().is_some_and(|d| !d.status.in_flight.is_empty());
                    let phase = doc.as_ref().map(|d| d.status.phase);
                    if in_flight && phase == Some(RolloutPhase::Progressing) {
                        run(scene, &["pool", "rollout", "pause", &scene.pool])
                            .await?
                            .expect_code(0)?;
                    }
                    phase == Some(RolloutPhase::Paused)
                }
                Hold::Canary => rollout_doc(scene)
                    .await?
                    .is_some_and(|d| d.status.phase == RolloutPhase::AwaitingApproval),
            };
            Ok(held.then_some(()))
        },
    )
    .await
}

/// Lets the run go on after the restart.
async fn release(scene: &mut Scene, case: &Case, fault: Option<u64>) -> Result<()> {
    match case.hold {
        Hold::Fault(_) | Hold::ForcedFault(_) => {
            if let Some(id) = fault {
                scene.sandbox.remove_fault(id).await?;
            }
        }
        Hold::Api(_) => {
            if let Some(hold) = scene.api_hold.as_mut() {
                hold.release().await?;
            }
            if case.step == "wait-ready" {
                nudge_until_ready(scene).await?;
            }
        }
        Hold::Budget => {
            if let Some(workloads) = &scene.workloads {
                workloads.set_min_available("web", 0).await?;
            }
        }
        Hold::BudgetThenForce => {}
        Hold::Finalizer => {
            if let Some(workloads) = &scene.workloads {
                let api: Api<Pod> =
                    Api::namespaced(workloads.client().clone(), workloads.namespace());
                for pod in workloads.pods_on(&scene.machine).await? {
                    let Some(name) = pod.metadata.name.clone() else {
                        continue;
                    };
                    if pod
                        .metadata
                        .finalizers
                        .as_ref()
                        .is_some_and(|f| !f.is_empty())
                    {
                        let patch = json!({ "metadata": { "finalizers": null } });
                        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                            .await?;
                    }
                }
            }
        }
        Hold::NoRoom => {
            let node_b = scene.machine_b.clone().context("the second machine")?;
            let kube = scene.stack.kube_client().await?;
            set_unschedulable(&kube, &node_b, false).await?;
        }
        Hold::Paused => {
            run(scene, &["pool", "rollout", "resume", &scene.pool])
                .await?
                .expect_code(0)?;
        }
        Hold::Canary => {
            run(scene, &["pool", "rollout", "approve", &scene.pool])
                .await?
                .expect_code(0)?;
        }
    }
    Ok(())
}

/// kwok gives a Node's Ready status up after five refused updates and tries again only when the
/// Node next changes (a kubelet would keep trying): touches an annotation of the Node every two
/// seconds until it is Ready.
async fn nudge_until_ready(scene: &Scene) -> Result<()> {
    let kube = scene.stack.kube_client().await?;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(kube.clone());
    let mut nudges = 0u32;
    eventually(
        &format!("{} to become Ready once released", scene.machine),
        REACH,
        Duration::from_secs(2),
        || {
            nudges += 1;
            let (nodes, kube, count) = (nodes.clone(), kube.clone(), nudges);
            async move {
                if node(&kube, &scene.machine)
                    .await?
                    .as_ref()
                    .is_some_and(nodewright_tests::kube_objects::is_node_ready)
                {
                    return Ok(Some(()));
                }
                let patch = json!({ "metadata": { "annotations": {
                    "e2e.nodewright.io/nudge": count.to_string() } } });
                nodes
                    .patch(
                        &scene.machine,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await?;
                Ok(None)
            }
        },
    )
    .await
}

/// Waits until the job's run has ended; its last status document.
async fn await_end(scene: &Scene, job: Job) -> Result<Ended> {
    eventually("the run to end after the restart", FINISH, POLL, || async {
        if job == Job::Rollout {
            let doc = rollout_doc(scene).await?;
            return Ok(doc
                .filter(|d| {
                    matches!(
                        d.status.phase,
                        RolloutPhase::Completed | RolloutPhase::Aborted | RolloutPhase::Canceled
                    )
                })
                .map(|d| Ended::Rollout(Box::new(d))));
        }
        Ok(machine_status(scene)
            .await?
            .filter(|d| d.run_status() != "running")
            .map(Ended::Machine))
    })
    .await
}

/// The run ended as its runbook says and left a consistent world.
async fn check_end(scene: &Scene, case: &Case, ended: &Ended) -> Result<()> {
    let kube = scene.stack.kube_client().await?;
    let left = scene.sandbox.machine_resources(&scene.machine).await?;
    let machine_node = node(&kube, &scene.machine).await?;
    match case.job {
        Job::Create => {
            ensure!(
                ended.machine()?.run_status() == "completed",
                "the create completed: {ended}"
            );
            ensure!(
                left.vms.len() == 1 && left.nics.len() == 1 && left.disks.len() == 1,
                "exactly one VM, NIC and OS disk: {left:#?}"
            );
            ensure!(
                machine_node
                    .as_ref()
                    .is_some_and(nodewright_tests::kube_objects::is_node_ready),
                "the Node is Ready"
            );
        }
        Job::FailingCreate => {
            ensure!(
                ended.machine()?.run_status() == "failed",
                "the create failed (AllocationFailed): {ended}"
            );
            ensure!(
                left.is_empty() && machine_node.is_none(),
                "nothing of the machine is left: {left:#?}"
            );
        }
        Job::Delete | Job::DrainingDelete => {
            ensure!(
                ended.machine()?.run_status() == "completed",
                "the delete completed: {ended}"
            );
            ensure!(
                left.is_empty() && machine_node.is_none(),
                "nothing of the machine is left: {left:#?}"
            );
        }
        Job::Drain | Job::VolumeDrain => {
            ensure!(
                ended.machine()?.run_status() == "completed",
                "the drain completed: {ended}"
            );
            let forced = ended
                .machine()?
                .drain()
                .is_some_and(|d| matches!(d.mode, DrainMode::Force { .. }));
            ensure!(
                forced == matches!(case.hold, Hold::BudgetThenForce | Hold::ForcedFault(_)),
                "force mode only when it was asked: {ended}"
            );
            let cordoned = machine_node
                .as_ref()
                .and_then(|n| n.spec.as_ref())
                .and_then(|s| s.unschedulable)
                == Some(true);
            ensure!(
                cordoned,
                "a maintenance drain leaves its Node cordoned until uncordon"
            );
            ensure!(
                left.vms.len() == 1 && left.nics.len() == 1,
                "the drained machine keeps exactly one VM and NIC: {left:#?}"
            );
            if case.job == Job::VolumeDrain {
                check_volume(scene, &kube, ended.machine()?).await?;
            }
            run(scene, &["machine", "uncordon", &scene.machine])
                .await?
                .expect_code(0)?;
        }
        Job::Rollout => {
            let Ended::Rollout(rollout) = ended else {
                bail!("a rollout's status: {ended}");
            };
            ensure!(
                rollout.status.phase == RolloutPhase::Completed,
                "the rollout completed: {ended}"
            );
            let machines = pool_machines(&scene.stack, &scene.pool).await?;
            ensure!(
                machines.len() == 2,
                "2 machines, no duplicate: {machines:?}"
            );
            for machine in &machines {
                let resources = scene.sandbox.machine_resources(machine).await?;
                ensure!(
                    resources.vms.len() == 1
                        && resources.nics.len() == 1
                        && resources.disks.len() == 1,
                    "{machine}: exactly one VM, NIC and OS disk: {resources:#?}"
                );
            }
            let template = rollout.status.template_hash.clone();
            crate::rollout::common::ensure_pool_is(&scene.stack, &scene.pool, 2, &template).await?;
        }
    }
    // Every Node of the pool is schedulable (or gone).
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(kube);
    let params =
        kube::api::ListParams::default().labels(&format!("nodewright.io/pool={}", scene.pool));
    for found in nodes.list(&params).await?.items {
        let name = found.metadata.name.clone().unwrap_or_default();
        if found.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
            bail!("Node {name} of the pool is left unschedulable");
        }
    }
    Ok(())
}

/// The volume cases: the pod runs on B, its volume attached to exactly one node, B: one
/// VolumeAttachment, attached, on B; the disk `managedBy` B's VM; never attached on two nodes at
/// once; the drain's status says the volume moved to B (in force mode: lists it).
async fn check_volume(
    scene: &Scene,
    kube: &kube::Client,
    ended: &MachineRunDocument,
) -> Result<()> {
    let node_b = scene.machine_b.as_deref().context("the second machine")?;
    let volume = scene.volume.as_deref().context("the volume")?;
    let workloads = scene.workloads.as_ref().context("the workloads")?;
    let arm = workloads.arm();
    let pods = workloads
        .wait_app_running(STATEFUL, 1, Some(node_b), REACH)
        .await?;
    ensure!(
        pods.iter().all(|pod| node_of(pod) == Some(node_b)),
        "the StatefulSet pod runs on {node_b}"
    );
    // The volume follows its pod: wait for the attachment, then for the disk in Azure.
    eventually(
        &format!("{volume} attached to {node_b} only, in Kubernetes and in Azure"),
        REACH,
        POLL,
        || async {
            let attachments = attachments_of(kube, volume).await?;
            let one_on_b = attachments.len() == 1
                && attachments[0].spec.node_name == node_b
                && is_attached(&attachments[0]);
            let disk_on_b = disk_managed_by(arm, volume).await?.as_deref() == Some(node_b);
            Ok((one_on_b && disk_on_b).then_some(()))
        },
    )
    .await
    .with_context(|| {
        scene
            .timeline
            .as_ref()
            .map(Timeline::render)
            .unwrap_or_default()
    })?;
    if let Some(timeline) = &scene.timeline {
        ensure!(
            timeline.most_attached_at_once(volume) <= 1,
            "{volume} was attached on two nodes at once\n{}",
            timeline.render()
        );
    }
    let drain = ended
        .drain()
        .with_context(|| format!("a drain's status: {ended}"))?;
    let entry = drain
        .volume(volume)
        .with_context(|| format!("{volume} in the drain's status: {ended}"))?;
    // In force mode the disk may have been released by the detach that followed the pod's
    // deletion before the force detach was sent: the world (above) is what must hold.
    if drain.mode == DrainMode::Graceful {
        ensure!(
            entry.state == VolumeState::Reattached && entry.new_node.as_deref() == Some(node_b),
            "the drain's status says {volume} moved to {node_b}: {}",
            shown(entry)
        );
    }
    Ok(())
}
