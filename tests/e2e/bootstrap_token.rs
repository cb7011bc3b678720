//! Join tokens minted per machine (`spec.template.bootstrapToken`): a pool whose bootstrap Secret
//! holds `kubeadm join … --token <<BOOTSTRAP_TOKEN>>` and no credential. Three creates run at once:
//!
//! - **joins**: `machine create --wait` reaches Ready. The token Secret existed during the create
//!   (the test reads it from `kube-system` while it exists), the sandbox's joiner authenticated
//!   with it before it registered the Node (its log says so, naming the Secret), the Node carries
//!   the label the Secret's text gives it, and afterwards the Secret is gone. The minted token's
//!   secret part is in no history of the pool's runs (payloads decoded), no worker or sandbox
//!   log line and no CLI output.
//! - **refused**: the machine's token Secret exists before the create, with nodewright's labels
//!   but not usable for authentication (`usage-bootstrap-authentication: "false"`): the create
//!   reuses it (a retried step's path), the apiserver refuses it, the VM never joins, the create
//!   fails at `register-node`, and afterwards nothing of the machine is left: no VM, NIC, disk,
//!   Node, nor the token Secret.
//! - **cancelled**: a create whose Node never joins (a sandbox fault), cancelled with
//!   `machine cancel --wait` once its token and VM exist, leaves nothing, the token Secret
//!   included.
//!
//! The sandbox of the stack must be built from this tree (its joiner checks tokens).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use nodewright_model::ClusterName;
use nodewright_model::bootstrap_token::machine_secret_name;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{CliResult, KillableWorker, Sandbox, cli, node, write_pool_file};
use nodewright_tests::secrets::{SecretScan, json_mentions};
use nodewright_tests::stack::run_dir;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};
use serde_json::json;
use tokio::sync::watch;

use crate::rollout::common::clean_up_pool;

/// The label the Secret's kubelet flags give the Node.
const LABEL: (&str, &str) = ("nodewright.test/joined-with", "minted-token");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minted_join_token_joins_its_machine_and_is_gone_after_ready_failure_and_cancel()
-> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let pool = format!("bt{}", &suffix[..6]);
    let task_queue = unique_task_queue("join-tokens");
    let worker = KillableWorker::start_with_full_log(&stack, &task_queue)?;
    let admin = stack.kube_client().await?;
    let bootstraps: Api<Secret> = Api::namespaced(admin.clone(), "nodewright");
    let secret_name = format!("join-{pool}");
    let text = format!(
        "#!/bin/bash\nkubeadm join 10.0.0.4:6443 --token <<BOOTSTRAP_TOKEN>> --discovery-token-unsafe-skip-ca-verification\nexec /usr/bin/kubelet --node-labels={}={}\n",
        LABEL.0, LABEL.1
    );
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": secret_name, "namespace": "nodewright" },
        "stringData": { "bootstrap": text },
    }))?;
    bootstraps.create(&PostParams::default(), &secret).await?;
    let sandbox = Sandbox::new(&stack)?;
    let cancelled = format!("{pool}-cancel");
    let fault = sandbox
        .add_fault(json!({ "kind": "never_joins", "vm": cancelled }))
        .await?;

    let result = scenario(&stack, &task_queue, &pool, &secret_name, &worker).await;

    sandbox.remove_fault(fault).await?;
    clean_up_pool(&stack, &task_queue, &pool).await;
    let _ = bootstraps
        .delete(&secret_name, &DeleteParams::default())
        .await;
    let tokens: Api<Secret> = Api::namespaced(admin, "kube-system");
    for machine in ["joins", "refused", "cancel"] {
        let _ = tokens
            .delete(
                &token_secret_name(&stack, &format!("{pool}-{machine}"))?,
                &DeleteParams::default(),
            )
            .await;
    }
    result
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    secret_name: &str,
    worker: &KillableWorker,
) -> Result<()> {
    let pool_file = pool_file(stack, pool, secret_name)?;
    let names = ["joins", "refused", "cancel"].map(|case| format!("{pool}-{case}"));
    let (joins, refused, cancelled) = tokio::join!(
        joins(stack, task_queue, &pool_file, &names[0]),
        refused(stack, task_queue, &pool_file, &names[1]),
        cancelled(stack, task_queue, &pool_file, &names[2]),
    );
    let (token, mut outputs) = joins?;
    outputs.extend(refused?);
    outputs.extend(cancelled?);
    // The secret part alone: it is in the whole token and in any other rendering of it.
    let token = token
        .split_once('.')
        .map(|(_, secret)| secret.to_owned())
        .context("the captured token has no secret part")?;

    // The minted token is nowhere but where it belongs.
    for args in [
        vec!["machine", "status", &format!("{pool}-joins")],
        vec!["runs", "--pool", pool],
    ] {
        let args: Vec<&str> = args.iter().map(|a| a.as_ref()).collect();
        outputs.push((args.join(" "), cli(stack, task_queue, &args).await?));
    }
    let runs = SecretScan {
        stack,
        task_queue,
        env: &[],
        secret: &token,
        named: "the minted token",
        outputs: &outputs,
        worker_log: &worker.log_text(),
        log_shows: &["join token minted"],
        log_not_captured: "the worker's log is not captured (no line says a join token was minted)",
        pools: &[pool],
    }
    .assert_nowhere()
    .await?;
    let sandbox_log =
        std::fs::read_to_string(run_dir().join("logs").join("sandbox.log")).unwrap_or_default();
    ensure!(
        !sandbox_log.contains(&token),
        "the sandbox logged the minted token"
    );
    let ids: Vec<&str> = runs.iter().map(|run| run.id.as_str()).collect();
    ensure!(ids.len() >= 3, "expected three creates among {ids:?}");
    for run in &runs {
        ensure!(
            !json_mentions(&run.history, "kube.delete_bootstrap_token").is_empty(),
            "{} never deleted its join token",
            run.id
        );
    }
    Ok(())
}

/// A create that joins with its minted token; returns the token and the CLI's output.
async fn joins(
    stack: &Stack,
    task_queue: &str,
    pool_file: &Path,
    machine: &str,
) -> Result<(String, Vec<(String, CliResult)>)> {
    let tokens = token_secrets(stack).await?;
    let secret = token_secret_name(stack, machine)?;
    let (stop, stopped) = watch::channel(false);
    let watcher = tokio::spawn(capture_token(tokens.clone(), secret.clone(), stopped));
    let created = create(stack, task_queue, pool_file, machine).await;
    let _ = stop.send(true);
    let token = watcher.await??;
    let created = created?;
    created.expect_code(0)?;
    let token = token
        .with_context(|| format!("the token Secret {secret} never existed during the create"))?;

    let joined = node(&stack.kube_client().await?, machine)
        .await?
        .context("the created machine has no Node")?;
    let labels = joined.metadata.labels.unwrap_or_default();
    ensure!(
        labels.get(LABEL.0).map(String::as_str) == Some(LABEL.1),
        "the Node lacks the label the Secret's bootstrap sets: {labels:?}"
    );
    let sandbox_log =
        std::fs::read_to_string(run_dir().join("logs").join("sandbox.log")).unwrap_or_default();
    ensure!(
        sandbox_log
            .lines()
            .any(|line| line.contains("bootstrap token authenticated") && line.contains(&secret)),
        "the sandbox's joiner did not authenticate with {secret} (is the stack's sandbox built from this tree?)"
    );
    ensure!(
        tokens.get_opt(&secret).await?.is_none(),
        "the token Secret {secret} is still there after the Node became Ready"
    );
    Ok((token, vec![("machine create --wait".to_owned(), created)]))
}

/// A create whose token (pre-made, not for authentication) the apiserver refuses: it fails and
/// leaves nothing.
async fn refused(
    stack: &Stack,
    task_queue: &str,
    pool_file: &Path,
    machine: &str,
) -> Result<Vec<(String, CliResult)>> {
    let tokens = token_secrets(stack).await?;
    let secret_name = token_secret_name(stack, machine)?;
    let id = secret_name
        .strip_prefix("bootstrap-token-")
        .context("token Secret name")?;
    let expiration = (chrono::Utc::now() + chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let unusable: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": secret_name,
            "namespace": "kube-system",
            "labels": { "nodewright.io/cluster": stack.cluster, "nodewright.io/machine": machine },
        },
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {
            "token-id": id,
            "token-secret": "0123456789abcdef",
            "expiration": expiration,
            "usage-bootstrap-authentication": "false",
            "usage-bootstrap-signing": "true",
        },
    }))?;
    tokens.create(&PostParams::default(), &unusable).await?;
    let created = create(stack, task_queue, pool_file, machine).await?;
    created.expect_code(3)?;
    ensure!(
        created.stderr.contains("register-node"),
        "the create failed elsewhere than at register-node: {}",
        created.stderr
    );
    ensure_nothing_left(stack, machine, &secret_name).await?;
    Ok(vec![("failed machine create".to_owned(), created)])
}

/// A create cancelled while it waits for its Node: it leaves nothing.
async fn cancelled(
    stack: &Stack,
    task_queue: &str,
    pool_file: &Path,
    machine: &str,
) -> Result<Vec<(String, CliResult)>> {
    let tokens = token_secrets(stack).await?;
    let secret = token_secret_name(stack, machine)?;
    let path = pool_file.to_string_lossy().into_owned();
    cli(
        stack,
        task_queue,
        &["machine", "create", "--pool", &path, "--name", machine],
    )
    .await?
    .expect_code(0)?;
    let sandbox = Sandbox::new(stack)?;
    eventually(
        &format!("{machine}'s token Secret and VM to exist"),
        Duration::from_secs(60),
        Duration::from_millis(300),
        || async {
            let minted = tokens.get_opt(&secret).await?.is_some();
            let made = sandbox.machine_resources(machine).await?;
            Ok((minted && !made.vms.is_empty()).then_some(()))
        },
    )
    .await?;
    let cancel = cli(stack, task_queue, &["machine", "cancel", machine, "--wait"]).await?;
    cancel.expect_code(0)?;
    ensure_nothing_left(stack, machine, &secret).await?;
    Ok(vec![("machine cancel --wait".to_owned(), cancel)])
}

/// No VM, NIC or disk of `machine`, no Node, no token Secret.
async fn ensure_nothing_left(stack: &Stack, machine: &str, secret: &str) -> Result<()> {
    let left = Sandbox::new(stack)?.machine_resources(machine).await?;
    ensure!(left.is_empty(), "{machine}'s create left {left:?}");
    ensure!(
        node(&stack.kube_client().await?, machine).await?.is_none(),
        "{machine}'s create left its Node"
    );
    let tokens = token_secrets(stack).await?;
    ensure!(
        tokens.get_opt(secret).await?.is_none(),
        "{machine}'s create left its token Secret {secret}"
    );
    let labelled = tokens
        .list(&ListParams::default().labels(&format!("nodewright.io/machine={machine}")))
        .await?;
    ensure!(
        labelled.items.is_empty(),
        "{machine}'s create left Secrets labelled with it in kube-system"
    );
    Ok(())
}

/// `machine create --wait`.
async fn create(
    stack: &Stack,
    task_queue: &str,
    pool_file: &Path,
    machine: &str,
) -> Result<CliResult> {
    let path = pool_file.to_string_lossy().into_owned();
    cli(
        stack,
        task_queue,
        &[
            "machine", "create", "--pool", &path, "--name", machine, "--wait",
        ],
    )
    .await
}

/// Reads the token Secret every 100 ms until `stop`; returns `<id>.<secret>` once seen.
async fn capture_token(
    tokens: Api<Secret>,
    name: String,
    mut stop: watch::Receiver<bool>,
) -> Result<Option<String>> {
    loop {
        if let Some(secret) = tokens.get_opt(&name).await? {
            let data = secret.data.unwrap_or_default();
            let text = |key: &str| {
                data.get(key)
                    .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
            };
            if let (Some(id), Some(secret)) = (text("token-id"), text("token-secret")) {
                return Ok(Some(format!("{id}.{secret}")));
            }
        }
        if *stop.borrow() {
            return Ok(None);
        }
        tokio::select! {
            _ = stop.changed() => {}
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

/// The pool file of `pool` (the stack's test template, creation timeout 30s) with its bootstrap
/// by reference to `secret_name` and a minted join token of 5 minutes.
fn pool_file(stack: &Stack, pool: &str, secret_name: &str) -> Result<PathBuf> {
    let pool_file = write_pool_file(stack, pool, "30s")?;
    let inline = std::fs::read_to_string(&pool_file)?;
    let minting = inline.replace(
        "    bootstrap: |\n      #!/bin/bash\n      exec /usr/bin/kubelet --cloud-provider=external <<REGISTER_WITH_TAINTS>>\n",
        &format!(
            "    bootstrapSecretRef:\n      namespace: nodewright\n      name: {secret_name}\n    bootstrapToken:\n      ttl: 5m\n      extraGroups: [\"system:bootstrappers:nodewright-e2e\"]\n"
        ),
    );
    ensure!(
        minting != inline,
        "the pool file's bootstrap was not replaced"
    );
    std::fs::write(&pool_file, minting)?;
    Ok(pool_file)
}

async fn token_secrets(stack: &Stack) -> Result<Api<Secret>> {
    Ok(Api::namespaced(stack.kube_client().await?, "kube-system"))
}

fn token_secret_name(stack: &Stack, machine: &str) -> Result<String> {
    let cluster = ClusterName::parse("cluster", &stack.cluster)?;
    Ok(machine_secret_name(&cluster, machine))
}
