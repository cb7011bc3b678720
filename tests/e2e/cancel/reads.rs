//! The runs that only read, cancelled mid-read: InspectPool (`nodewright pool status`) and
//! Preflight (`nodewright preflight`), on a worker whose apiserver stops answering once the
//! worker has started (a proxy that goes silent after the worker's cluster identity check), so
//! each waits in its Kubernetes read. `temporal
//! workflow cancel` ends each run Canceled at that read; the CLI that waited for the answer
//! exits non-zero saying the run was canceled and during which read.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    // A cluster of its own: a worker runs only its cluster's runs, and the preflight below names
    // a cluster no other test uses.
    let mut stack = Stack::load()?;
    stack.cluster = format!("cr-{}", unique_suffix());
    let admin = std::fs::read_to_string(&stack.kubeconfig)?;
    let server = admin
        .lines()
        .find_map(|line| line.trim().strip_prefix("server: https://"))
        .context("no server in the admin kubeconfig")?
        .to_owned();
    let silent = SilentApiserver::start(&server)?;
    let dir = scratch_dir("cancel-reads")?;
    let kubeconfig = dir.join("silent.kubeconfig");
    std::fs::File::create(&kubeconfig)?.write_all(silent.kubeconfig(&admin, &server).as_bytes())?;
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
    // The worker checks its cluster identity at start, through the proxy; then it goes silent.
    eventually(
        "the worker to check its cluster identity",
        WAIT,
        Duration::from_millis(200),
        || async {
            let log = worker.stdout();
            Ok((log.contains("is the configured cluster")
                || log.contains("recorded its cluster identity"))
            .then_some(()))
        },
    )
    .await
    .with_context(|| format!("worker log:\n{}{}", worker.stdout(), worker.stderr()))?;
    silent.go_silent();

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
    let cluster = stack.cluster.clone();
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

/// The stack's apiserver behind a TCP proxy that goes silent on demand: until then it relays
/// everything (the worker checks its cluster identity at start); from then on it relays nothing
/// more from the client, on open connections and new ones, so every request waits.
struct SilentApiserver {
    port: u16,
    silent: Arc<AtomicBool>,
    reads: Arc<AtomicUsize>,
}

impl SilentApiserver {
    /// Listens on a free port of 127.0.0.1 and relays to `upstream` (`host:port`); a thread per
    /// connection.
    fn start(upstream: &str) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let silent = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicUsize::new(0));
        let (upstream, relay_silent, relay_reads) =
            (upstream.to_owned(), silent.clone(), reads.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (upstream, silent, reads) =
                    (upstream.clone(), relay_silent.clone(), relay_reads.clone());
                std::thread::spawn(move || relay(client, &upstream, &silent, &reads));
            }
        });
        Ok(Self {
            port,
            silent,
            reads,
        })
    }

    /// From now on nothing more reaches the apiserver.
    fn go_silent(&self) {
        self.silent.store(true, Ordering::SeqCst);
    }

    /// The stack's admin kubeconfig, its server replaced by this proxy.
    fn kubeconfig(&self, admin: &str, server: &str) -> String {
        admin.replace(
            &format!("https://{server}"),
            &format!("https://127.0.0.1:{}", self.port),
        )
    }

    /// Reads (chunks of requests) held back since the proxy went silent: each is a read that
    /// waits.
    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }

    /// Waits until `count` reads have been held back.
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

/// Relays `client` to `upstream` until the proxy goes silent, then holds back (and counts) what
/// the client sends. A connection accepted while silent never reaches the apiserver.
fn relay(mut client: TcpStream, upstream: &str, silent: &AtomicBool, reads: &AtomicUsize) {
    let mut server = None;
    if !silent.load(Ordering::SeqCst) {
        let Ok(connected) = TcpStream::connect(upstream) else {
            return;
        };
        if let (Ok(mut from_server), Ok(mut to_client)) =
            (connected.try_clone(), client.try_clone())
        {
            std::thread::spawn(move || std::io::copy(&mut from_server, &mut to_client));
        }
        server = Some(connected);
    }
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let read = match client.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        match server.as_mut() {
            Some(server) if !silent.load(Ordering::SeqCst) => {
                if server.write_all(&buffer[..read]).is_err() {
                    return;
                }
            }
            _ => {
                reads.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}
