//! Bootstrap by reference: a pool whose template names its bootstrap in a Kubernetes Secret
//! (`bootstrapSecretRef`). The Secret's text reaches the VM (the sandbox's kubelet reads the
//! `--node-labels` it carries, so the Node shows it), and its join token is in no history (every
//! payload decoded), no worker log line and no CLI output, after a create, a failed create, a
//! cancelled create and a rollout. The scan itself is checked: the histories do carry the Secret's name. A Secret that
//! does not exist fails the create before its VM, naming the Secret, and leaves nothing.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{
    CliResult, KillableWorker, Sandbox, cli, create_machine, node, write_pool_file,
};
use nodewright_tests::secrets::{SecretScan, json_mentions};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};
use serde_json::json;

use crate::rollout::common::clean_up_pool;

/// The label the Secret's kubelet flags give the Node.
const LABEL: (&str, &str) = ("nodewright.test/bootstrap", "from-secret");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_secret_reaches_the_vm_and_no_history_log_or_output() -> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let pool = format!("bs{}", &suffix[..6]);
    let task_queue = unique_task_queue("secrets");
    let worker = KillableWorker::start_with_full_log(&stack, &task_queue)?;
    let secrets: Api<Secret> = Api::namespaced(stack.kube_client().await?, "nodewright");
    let secret_name = format!("bootstrap-{pool}");
    // A bootstrap token's form, unique to this run: [a-z0-9]{6}.[a-z0-9]{16}.
    let token = format!("{}.{}{}", &suffix[..6], &suffix, &suffix[..8]);
    let text = format!(
        "#!/bin/bash\nkubeadm join 10.0.0.4:6443 --token {token} --discovery-token-ca-cert-hash sha256:00\nexec /usr/bin/kubelet --node-labels={}={}\n",
        LABEL.0, LABEL.1
    );
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": secret_name, "namespace": "nodewright" },
        "stringData": { "bootstrap": text },
    }))?;
    secrets.create(&PostParams::default(), &secret).await?;
    let sandbox = Sandbox::new(&stack)?;
    let mut faults = Vec::new();
    for machine in [format!("{pool}-fails"), format!("{pool}-cancel")] {
        let rule = json!({ "kind": "never_joins", "vm": machine });
        faults.push(sandbox.add_fault(rule).await?);
    }

    let result = scenario(&stack, &task_queue, &pool, &secret_name, &token, &worker).await;

    for fault in faults {
        sandbox.remove_fault(fault).await?;
    }
    clean_up_pool(&stack, &task_queue, &pool).await;
    let _ = secrets.delete(&secret_name, &DeleteParams::default()).await;
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bootstrap_secret_fails_the_create_naming_it_and_leaves_nothing() -> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let pool = format!("bm{}", &suffix[..6]);
    let task_queue = unique_task_queue("secrets-missing");
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let pool_file = by_reference(&stack, &pool, &format!("absent-{pool}"))?;
    let machine = format!("{pool}-nosecret");
    let created = create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])?;
    let left = Sandbox::new(&stack)?.machine_resources(&machine).await?;
    created.expect_code(3)?;
    ensure!(
        created.stderr.contains(&format!(
            "the bootstrap Secret nodewright/absent-{pool}, key bootstrap does not exist"
        )),
        "the failure names the Secret and the fix: {}",
        created.stderr
    );
    ensure!(left.is_empty(), "the failed create left {left:?}");
    Ok(())
}

/// The pool file of `pool` (the stack's test template, creation timeout 30s) with its bootstrap
/// given by reference to the Secret `secret_name`'s key `bootstrap` in `nodewright`.
fn by_reference(stack: &Stack, pool: &str, secret_name: &str) -> Result<std::path::PathBuf> {
    let pool_file = write_pool_file(stack, pool, "30s")?;
    let inline = std::fs::read_to_string(&pool_file)?;
    let by_reference = inline.replace(
        "    bootstrap: |\n      #!/bin/bash\n      exec /usr/bin/kubelet --cloud-provider=external <<REGISTER_WITH_TAINTS>>\n",
        &format!(
            "    bootstrapSecretRef:\n      namespace: nodewright\n      name: {secret_name}\n"
        ),
    );
    ensure!(
        by_reference != inline,
        "the pool file's bootstrap was not replaced"
    );
    std::fs::write(&pool_file, by_reference)?;
    Ok(pool_file)
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    secret_name: &str,
    token: &str,
    worker: &KillableWorker,
) -> Result<()> {
    let pool_file = by_reference(stack, pool, secret_name)?;
    let mut outputs: Vec<(String, CliResult)> = Vec::new();

    // A create: the Secret's kubelet flags reach the VM, so its Node carries their label.
    let machine = format!("{pool}-joins");
    let created = create_machine(stack, task_queue, &pool_file, &machine, &["--wait"])?;
    created.expect_code(0)?;
    outputs.push(("machine create".to_owned(), created));
    let joined = node(&stack.kube_client().await?, &machine)
        .await?
        .context("the created machine has no Node")?;
    let labels = joined.metadata.labels.unwrap_or_default();
    ensure!(
        labels.get(LABEL.0).map(String::as_str) == Some(LABEL.1),
        "the Node lacks the label the Secret's bootstrap sets: {labels:?}"
    );

    // A failed create (its Node never joins): it fails and cleans up, the token nowhere.
    let failing = format!("{pool}-fails");
    let failed = create_machine(stack, task_queue, &pool_file, &failing, &["--wait"])?;
    failed.expect_code(3)?;
    outputs.push(("failed machine create".to_owned(), failed));

    // A create cancelled once its VM exists (the Secret read), its Node never joining: it
    // undoes everything, the token nowhere.
    let cancelled = format!("{pool}-cancel");
    create_machine(stack, task_queue, &pool_file, &cancelled, &[])?.expect_code(0)?;
    let sandbox = Sandbox::new(stack)?;
    eventually(
        &format!("{cancelled}'s VM to exist"),
        Duration::from_secs(60),
        Duration::from_millis(300),
        || async {
            let made = sandbox.machine_resources(&cancelled).await?;
            Ok((!made.vms.is_empty()).then_some(()))
        },
    )
    .await?;
    let cancel = cli(
        stack,
        task_queue,
        &["machine", "cancel", &cancelled, "--wait"],
    )
    .await?;
    cancel.expect_code(0)?;
    outputs.push(("machine cancel".to_owned(), cancel));
    let left = sandbox.machine_resources(&cancelled).await?;
    ensure!(left.is_empty(), "the cancelled create left {left:?}");

    // A rollout to two machines: it creates one more from the same template.
    let path = pool_file.to_string_lossy().into_owned();
    let rolled = cli(
        stack,
        task_queue,
        &["pool", "rollout", "--pool", &path, "--wait"],
    )
    .await?;
    rolled.expect_code(0)?;
    outputs.push(("pool rollout".to_owned(), rolled));
    for args in [
        vec!["machine", "status", machine.as_str()],
        vec!["pool", "status", pool],
        vec!["runs", "--pool", pool],
    ] {
        let result = cli(stack, task_queue, &args).await?;
        outputs.push((args.join(" "), result));
    }

    let runs = SecretScan {
        stack,
        task_queue,
        env: &[],
        secret: token,
        named: "the bootstrap token",
        outputs: &outputs,
        worker_log: &worker.log_text(),
        log_shows: &[&machine],
        log_not_captured: &format!("the worker's log is not captured (no line names {machine})"),
        pools: &[pool],
    }
    .assert_nowhere()
    .await?;
    let ids: Vec<&str> = runs.iter().map(|run| run.id.as_str()).collect();
    ensure!(
        ids.len() >= 5,
        "expected three creates, the rollout and its create among {ids:?}"
    );
    for run in &runs {
        if run.id.starts_with("create/") {
            ensure!(
                !json_mentions(&run.history, secret_name).is_empty(),
                "{}'s history does not name the Secret: the scan sees nothing",
                run.id
            );
        }
    }
    Ok(())
}
