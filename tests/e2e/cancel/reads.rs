//! The runs that only read, cancelled mid-read: InspectPool (`nodewright pool status`) and
//! Preflight (`nodewright preflight`), on a worker whose apiserver never answers (a listener
//! that accepts connections and stays silent), so each waits in its Kubernetes read. `temporal
//! workflow cancel` ends each run Canceled at that read; the CLI that waited for the answer
//! exits non-zero saying the run was canceled and during which read.

use std::io::Write;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::eventually;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::cli;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::worker_process::{WorkerProcess, free_address, scratch_dir, stack_config};

use super::{run_status, temporal_cancel};

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_pool_and_preflight_cancelled_mid_read_end_canceled() -> Result<()> {
    let stack = Stack::load()?;
    let silent = SilentApiserver::start()?;
    let dir = scratch_dir("cancel-reads")?;
    let kubeconfig = dir.join("silent.kubeconfig");
    std::fs::File::create(&kubeconfig)?.write_all(silent.kubeconfig().as_bytes())?;
    let task_queue = unique_task_queue("cancel-reads");
    let (health, metrics) = (free_address()?, free_address()?);
    let config = stack_config(&stack, &task_queue, health, metrics).replace(
        &format!("kubeconfig = \"{}\"", stack.kubeconfig.display()),
        &format!("kubeconfig = \"{}\"", kubeconfig.display()),
    );
    ensure!(
        config.contains("silent.kubeconfig"),
        "the worker's config points at the silent apiserver"
    );
    let worker = WorkerProcess::spawn(&dir, &config, health, metrics, &[])?;

    let result = scenario(&stack, &task_queue, &silent).await;
    result.with_context(|| format!("worker log:\n{}", worker.stdout()))
}

async fn scenario(stack: &Stack, task_queue: &str, silent: &SilentApiserver) -> Result<()> {
    // InspectPool: the VMs are listed from ARM, then the Nodes' list hangs.
    let pool = format!("cr{}", unique_suffix());
    let looking = tokio::spawn({
        let (stack, task_queue, pool) = (stack.clone(), task_queue.to_owned(), pool.clone());
        async move {
            cli(
                &stack,
                &task_queue,
                &["pool", "status", &pool, "--timeout", "120"],
            )
            .await
        }
    });
    silent.await_reads(1).await?;
    let inspect_id = format!("inspect/{}/{pool}", stack.cluster);
    temporal_cancel(stack, &inspect_id).await?;
    let looked = looking.await??;
    ensure!(
        looked.code == Some(3)
            && looked.stderr.contains(&format!(
                "{inspect_id} was canceled (canceled during list-pool-nodes; nothing to undo)"
            )),
        "pool status says the look was canceled during its Node list: code {:?}, stderr {}",
        looked.code,
        looked.stderr
    );
    ensure_canceled(stack, &inspect_id).await?;

    // Preflight: its only read hangs.
    let cluster = format!("cr-{}", unique_suffix());
    let checking = tokio::spawn({
        let (stack, task_queue, cluster) = (stack.clone(), task_queue.to_owned(), cluster.clone());
        async move {
            cli(
                &stack,
                &task_queue,
                &["preflight", "--cluster", &cluster, "--timeout", "120"],
            )
            .await
        }
    });
    let before = silent.reads();
    silent.await_reads(before + 1).await?;
    let preflight_id = format!("preflight/{cluster}");
    temporal_cancel(stack, &preflight_id).await?;
    let checked = checking.await??;
    ensure!(
        checked.code == Some(3)
            && checked.stderr.contains(&format!(
                "{preflight_id} was canceled (canceled during inspecting-kubernetes; nothing to undo)"
            )),
        "preflight says the check was canceled during its read: code {:?}, stderr {}",
        checked.code,
        checked.stderr
    );
    ensure_canceled(stack, &preflight_id).await
}

/// The run ended Canceled, not Failed.
async fn ensure_canceled(stack: &Stack, workflow_id: &str) -> Result<()> {
    let status = eventually(
        &format!("{workflow_id} to end"),
        WAIT,
        Duration::from_millis(500),
        || async {
            let status = run_status(stack, workflow_id).await?;
            Ok((status != "RUNNING" && status != "Running").then_some(status))
        },
    )
    .await?;
    ensure!(
        status == "CANCELED" || status == "Canceled",
        "{workflow_id} ended {status}"
    );
    Ok(())
}

/// An "apiserver" that accepts TCP connections and never answers: every request to it waits.
struct SilentApiserver {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl SilentApiserver {
    /// Listens on a free port of 127.0.0.1; a thread accepts and holds every connection.
    fn start() -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming().flatten() {
                counter.fetch_add(1, Ordering::SeqCst);
                held.push(stream);
            }
        });
        Ok(Self { port, accepted })
    }

    /// A kubeconfig whose cluster is this listener.
    fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: silent
  cluster:
    server: https://127.0.0.1:{port}
    insecure-skip-tls-verify: true
users:
- name: silent
  user:
    token: not-a-secret
contexts:
- name: silent
  context:
    cluster: silent
    user: silent
current-context: silent
",
            port = self.port
        )
    }

    /// Connections accepted so far: each is a read that waits.
    fn reads(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Waits until `count` connections have come.
    async fn await_reads(&self, count: usize) -> Result<()> {
        eventually(
            &format!("{count} reads to reach the silent apiserver"),
            WAIT,
            Duration::from_millis(100),
            || async { Ok((self.reads() >= count).then_some(())) },
        )
        .await
    }
}
