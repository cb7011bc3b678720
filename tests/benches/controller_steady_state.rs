//! What a pool controller costs in steady state (issue 23: "for a 200-machine pool, at most 2 ARM
//! requests per minute, apiserver traffic from watches only, worker CPU near 0"), measured on the
//! local stack and printed; nothing about speed is asserted (the machines here are noisy).
//!
//! Run: `cargo bench -p nodewright-tests --bench controller_steady_state` with the local stack up
//! (`dev/stack up`) and the binaries built (`cargo build --workspace --bins`); add `--profile dev`
//! to reuse the debug build instead of compiling everything optimized. The windows last
//! `NODEWRIGHT_BENCH_MINUTES` minutes each (default 3); the whole run takes about 10 minutes.
//!
//! # Expected Flow
//! 1. Check the stack answers (sandbox, apiserver, Temporal) and the binaries exist.
//! 2. Seed 200 machines under a cluster, subscription and resource group of the benchmark's own
//!    ([`fleet`]): VMs tagged as CreateMachine tags them, booted so the sandbox registers their
//!    Nodes, labelled as CreateMachine labels them, Ready.
//! 3. Start a worker for that cluster; after it settled, measure the baseline window (the worker
//!    idle, no controller).
//! 4. `nodewright pool apply -f FILE` (the default observe interval, 60 s); wait until the status
//!    shows 200 ready, `Available` True and no create or delete among the last actions.
//! 5. Measure the controller window; check the pool is still steady.
//! 6. Print the table ([`report`]); end the controller (`pool delete --orphan`) and remove every
//!    VM, Node and Lease seeded, also when a step failed (best effort).
//!
//! # Errors
//! Exits non-zero with the reason when the stack is down, when seeding fails, and when the
//! controller does not reach (or leaves) its steady state: a correctness failure, not a timing
//! one.
//!
//! Run by `cargo test --benches` (without cargo bench's `--bench` flag) it only says how to run
//! it.

#[path = "controller_steady_state/fleet.rs"]
mod fleet;
#[path = "controller_steady_state/meters.rs"]
mod meters;
#[path = "controller_steady_state/report.rs"]
mod report;

use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::FutureExt;
use nodewright_model::controller::PoolStatusDocument;
use nodewright_tests::Stack;
use nodewright_tests::binaries::binary;
use nodewright_tests::identity::await_identity_recorded;
use nodewright_tests::machines::{KillableWorker, cli};
use nodewright_tests::stack::{kubectl, temporal_cli};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::worker_meters::ensure_requests_logged;

use fleet::Fleet;
use meters::{ArmLog, Reading, Subject, Window};

/// The pool's size, as the issue states the ceiling for.
const REPLICAS: u32 = 200;
/// The variable that sets each window's length in minutes.
const MINUTES_VARIABLE: &str = "NODEWRIGHT_BENCH_MINUTES";
/// Each window's length when the variable is unset.
const DEFAULT_MINUTES: f64 = 3.0;
/// How long the worker may settle after it started before the baseline window starts.
const SETTLE: Duration = Duration::from_secs(20);
/// How long the controller may take to report its steady state.
const STEADY_TIMEOUT: Duration = Duration::from_secs(420);
/// How often the status is read while waiting for the steady state.
const STATUS_POLL: Duration = Duration::from_secs(5);
/// How often the sandbox's request log is read while a window runs.
const COLLECT_EVERY: Duration = Duration::from_secs(15);
/// What the worker logs: info, and kube-client's one debug line per request.
const WORKER_LOG_FILTER: &str = "info,kube_client=debug";

fn main() -> ExitCode {
    nodewright_tests::bench::main(
        "controller_steady_state",
        "the local stack and about 10 minutes",
        run(),
    )
}

async fn run() -> Result<()> {
    let minutes = window_minutes()?;
    let stack = Stack::load()?;
    check_stack(&stack).await?;
    let fleet = Fleet::plan(&stack, REPLICAS)?;
    println!(
        "cluster {}, pool {} ({} machines, template {}), subscription {}, resource group {}",
        fleet.cluster,
        fleet.pool.name,
        fleet.machines.len(),
        fleet.pool.template_hash,
        fleet.stack.arm.subscription_id,
        fleet.stack.arm.resource_group
    );
    let mut session = Session {
        task_queue: unique_task_queue("bench"),
        fleet,
        worker: None,
        controller: None,
    };
    // A panic is a failure too: the clean-up runs after it as after an error.
    let outcome = match AssertUnwindSafe(session.measure(minutes))
        .catch_unwind()
        .await
    {
        Ok(outcome) => outcome,
        Err(_) => Err(anyhow::anyhow!("the benchmark panicked (see above)")),
    };
    if let (Err(_), Some(worker)) = (&outcome, &session.worker) {
        eprintln!("worker log (last lines):\n{}", worker.log_tail());
    }
    session.clean_up().await;
    outcome
}

/// The window length from [`MINUTES_VARIABLE`].
fn window_minutes() -> Result<f64> {
    let minutes = match std::env::var(MINUTES_VARIABLE) {
        Ok(text) => text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|m| *m > 0.0)
            .with_context(|| {
                format!(
                    "{MINUTES_VARIABLE} is '{text}': give the minutes of each window as a positive \
                 number, e.g. 3"
                )
            })?,
        Err(_) => DEFAULT_MINUTES,
    };
    if minutes < DEFAULT_MINUTES {
        println!(
            "note: windows of {minutes} min are shorter than the {DEFAULT_MINUTES} min the figures \
             are meant for (a 60 s observe interval looks only a few times)"
        );
    }
    Ok(minutes)
}

/// Fails with what to do when a part of the stack does not answer or a binary is missing.
async fn check_stack(stack: &Stack) -> Result<()> {
    let down = "the local stack is down or unreachable; start it with `dev/stack up`";
    for name in ["nodewright-worker", "nodewright"] {
        binary(name).context("the benchmark runs the workspace's binaries")?;
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    http.get(format!(
        "{}/sandbox/latency",
        stack.arm.endpoint.trim_end_matches('/')
    ))
    .bearer_auth(&stack.arm.token)
    .send()
    .await
    .and_then(reqwest::Response::error_for_status)
    .with_context(|| {
        format!(
            "the sandbox (ARM) at {} does not answer: {down}",
            stack.arm.endpoint
        )
    })?;
    let kubectl = kubectl()?;
    let kubeconfig = stack.kubeconfig.clone();
    let ready = tokio::task::spawn_blocking(move || {
        std::process::Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["get", "--raw", "/readyz", "--request-timeout", "5s"])
            .output()
    })
    .await??;
    if !ready.status.success() {
        bail!(
            "the apiserver is not ready ({}): {down}",
            String::from_utf8_lossy(&ready.stderr).trim()
        );
    }
    tokio::time::timeout(Duration::from_secs(15), stack.temporal_client())
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "Temporal at {} did not answer within 15s",
                stack.temporal_address
            )
        })
        .and_then(|connected| connected)
        .with_context(|| format!("Temporal at {}: {down}", stack.temporal_address))?;
    Ok(())
}

/// One run: the fleet, its worker and its controller.
struct Session {
    fleet: Fleet,
    task_queue: String,
    worker: Option<KillableWorker>,
    /// The controller's workflow id, once `pool apply` started it.
    controller: Option<String>,
}

impl Session {
    /// Steps 2 to 6 of the module doc, clean-up aside.
    async fn measure(&mut self, minutes: f64) -> Result<()> {
        let seeding = Instant::now();
        self.fleet.seed().await?;
        println!(
            "seeded {} machines in {:.0}s",
            self.fleet.machines.len(),
            seeding.elapsed().as_secs_f64()
        );

        let worker = KillableWorker::start_with_full_log_at(
            &self.fleet.stack,
            &self.task_queue,
            &[
                ("RUST_LOG", WORKER_LOG_FILTER),
                ("NODEWRIGHT_LOG_FORMAT", "json"),
            ],
        )?;
        self.worker = Some(worker);
        await_identity_recorded(&self.fleet.stack.cluster).await?;
        tokio::time::sleep(SETTLE).await;
        ensure_requests_logged(&self.worker()?.log_text())?;
        let mut arm_log = ArmLog::new(&self.fleet.stack)?;
        arm_log.collect().await?;

        println!("baseline window: {minutes} min, the worker idle");
        let baseline = self.window(&mut arm_log, minutes).await?;

        let file = self.fleet.pool_file.to_string_lossy().into_owned();
        let applied = cli(
            &self.fleet.stack,
            &self.task_queue,
            &["pool", "apply", "-f", &file, "--output", "json"],
        )
        .await?
        .expect_code(0)?
        .json()?;
        let workflow_id = applied["workflowId"]
            .as_str()
            .with_context(|| format!("pool apply printed no workflowId: {applied}"))?
            .to_owned();
        self.controller = Some(workflow_id);
        let applying = Instant::now();
        let steady = self.await_steady().await?;
        println!(
            "steady after {:.0}s: {} ready of {}, last actions: {}",
            applying.elapsed().as_secs_f64(),
            steady.status.ready_replicas,
            steady.spec.replicas,
            steady.status.last_actions.len()
        );

        println!("controller window: {minutes} min");
        let controller = self.window(&mut arm_log, minutes).await?;
        let after = self.status().await?;
        if let Some(problem) = unsteady(&after, REPLICAS) {
            bail!("the controller left its steady state during the window: {problem}");
        }
        report::print(self.fleet.machines.len(), &baseline, &controller);
        Ok(())
    }

    /// Measures one window of `minutes`.
    async fn window(&mut self, arm_log: &mut ArmLog, minutes: f64) -> Result<Window> {
        let start = self.read(arm_log).await?;
        let ends = start.at + Duration::from_secs_f64(minutes * 60.0);
        loop {
            let now = Instant::now();
            if now >= ends {
                break;
            }
            tokio::time::sleep(COLLECT_EVERY.min(ends - now)).await;
            arm_log.collect().await?;
        }
        let end = self.read(arm_log).await?;
        let log = self.worker()?.log_text();
        Ok(Window::between(&start, &end, arm_log, &log))
    }

    async fn read(&mut self, arm_log: &mut ArmLog) -> Result<Reading> {
        let worker = self.worker.as_mut().context("the worker was not started")?;
        if !worker.is_running() {
            bail!("the worker exited; its log:\n{}", worker.log_tail());
        }
        let pid = worker.pid().context("the worker has no process id")?;
        let subject = Subject {
            pid,
            log: worker.log_text(),
            controller: self.controller.as_deref(),
        };
        meters::read(&self.fleet.stack, arm_log, subject).await
    }

    fn worker(&self) -> Result<&KillableWorker> {
        self.worker.as_ref().context("the worker was not started")
    }

    /// `pool status POOL --output json`, typed.
    async fn status(&self) -> Result<PoolStatusDocument> {
        cli(
            &self.fleet.stack,
            &self.task_queue,
            &["pool", "status", &self.fleet.pool.name, "--output", "json"],
        )
        .await?
        .expect_code(0)?
        .parse()
    }

    /// Polls the status until [`unsteady`] finds nothing; fails with the last problem.
    async fn await_steady(&self) -> Result<PoolStatusDocument> {
        let deadline = tokio::time::Instant::now() + STEADY_TIMEOUT;
        loop {
            let problem = match self.status().await {
                Ok(document) => match unsteady(&document, REPLICAS) {
                    None => return Ok(document),
                    Some(problem) => problem,
                },
                Err(error) => format!("{error:#}"),
            };
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "the controller did not reach its steady state within {}s: {problem}",
                    STEADY_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(STATUS_POLL).await;
        }
    }

    /// Ends the controller and removes what was seeded; failures are printed, not returned.
    async fn clean_up(&mut self) {
        if let Some(workflow_id) = &self.controller {
            let ended = cli(
                &self.fleet.stack,
                &self.task_queue,
                &["pool", "delete", &self.fleet.pool.name, "--orphan"],
            )
            .await;
            match ended {
                Ok(answer) if answer.code == Some(0) => {
                    println!("clean-up: the controller ended (machines orphaned)");
                }
                Ok(answer) => {
                    eprintln!(
                        "clean-up: pool delete --orphan exited {}: {}",
                        answer
                            .code
                            .map_or("by a signal".to_owned(), |c| c.to_string()),
                        answer.stderr.trim()
                    );
                    terminate(&self.fleet.stack, workflow_id);
                }
                Err(error) => {
                    eprintln!("clean-up: pool delete --orphan: {error:#}");
                    terminate(&self.fleet.stack, workflow_id);
                }
            }
        }
        self.fleet.remove().await;
        self.worker = None;
    }
}

/// What keeps `document` from the steady state of `replicas` machines: all of them counted,
/// Ready and available, none unhealthy, `Available` True, phase `Active`, and no create or
/// delete among the last actions. `None` when steady.
fn unsteady(document: &PoolStatusDocument, replicas: u32) -> Option<String> {
    let status = &document.status;
    let available = status
        .conditions
        .iter()
        .find(|condition| condition.type_ == "Available");
    let acted: Vec<&str> = status
        .last_actions
        .iter()
        .map(|action| action.text.as_str())
        .filter(|text| text.contains("creating machine") || text.contains("deleting machine"))
        .collect();
    if document.spec.replicas != replicas {
        Some(format!("spec.replicas is {}", document.spec.replicas))
    } else if status.replicas != replicas
        || status.ready_replicas != replicas
        || status.available_replicas != replicas
        || status.unhealthy_replicas != 0
    {
        Some(format!(
            "replicas {}, readyReplicas {}, availableReplicas {}, unhealthyReplicas {} \
             (expected {replicas} and no unhealthy)",
            status.replicas,
            status.ready_replicas,
            status.available_replicas,
            status.unhealthy_replicas
        ))
    } else if available.is_none_or(|condition| condition.status != "True") {
        Some(
            available.map_or("no Available condition".to_owned(), |condition| {
                format!(
                    "Available is {} ({}: {})",
                    condition.status, condition.reason, condition.message
                )
            }),
        )
    } else if status.phase != "Active" {
        Some(format!("phase {}", status.phase))
    } else if !acted.is_empty() {
        Some(format!(
            "the controller created or deleted machines: {}",
            acted.join("; ")
        ))
    } else {
        None
    }
}

/// Terminates the controller through the Temporal CLI (when `pool delete --orphan` failed).
fn terminate(stack: &Stack, workflow_id: &str) {
    let terminated = temporal_cli().and_then(|cli| {
        Ok(std::process::Command::new(cli)
            .args([
                "workflow",
                "terminate",
                "--workflow-id",
                workflow_id,
                "--reason",
                "controller_steady_state benchmark clean-up",
                "--address",
                &stack.temporal_address,
                "--namespace",
                &stack.temporal_namespace,
            ])
            .output()?)
    });
    match terminated {
        Ok(output) if output.status.success() => {
            println!("clean-up: controller {workflow_id} terminated");
        }
        Ok(output) => eprintln!(
            "clean-up: terminating {workflow_id}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ),
        Err(error) => eprintln!("clean-up: terminating {workflow_id}: {error:#}"),
    }
}
