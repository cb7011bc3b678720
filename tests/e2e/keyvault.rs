//! Bootstrap from Azure Key Vault: a pool whose template names its bootstrap by secret URI
//! (`bootstrapKeyVaultSecret`), read by the worker from the sandbox's Key Vault data plane
//! (`NODEWRIGHT_KEYVAULT_ENDPOINT`) when it builds the VM. The secret's kubelet flags reach the
//! Node, and its join token is in no history (every payload decoded), no worker log line and no
//! CLI output; the scan is checked (the create's history does name the URI). A secret that does
//! not exist, a disabled one (403) and a worker the vault does not accept (401) fail the create
//! before its VM, naming the fix, and leave nothing.

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{
    CliResult, KillableWorker, Sandbox, cli, create_machine, node, write_pool_file,
};
use nodewright_tests::secrets::{SecretScan, json_mentions};
use nodewright_tests::temporal_worker::unique_task_queue;

use crate::rollout::common::clean_up_pool;

/// The label the secret's kubelet flags give the Node.
const LABEL: (&str, &str) = ("nodewright.test/bootstrap", "from-key-vault");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_vault_bootstrap_reaches_the_vm_and_no_history_log_or_output() -> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let pool = format!("kv{}", &suffix[..6]);
    let task_queue = unique_task_queue("keyvault");
    let worker = KillableWorker::start_with_full_log(&stack, &task_queue)?;
    // A bootstrap token's form, unique to this run: [a-z0-9]{6}.[a-z0-9]{16}.
    let token = format!("{}.{}{}", &suffix[..6], &suffix, &suffix[..8]);
    let text = format!(
        "#!/bin/bash\nkubeadm join 10.0.0.4:6443 --token {token} --discovery-token-ca-cert-hash sha256:00\nexec /usr/bin/kubelet --node-labels={}={}\n",
        LABEL.0, LABEL.1
    );
    let vault = format!("v{pool}");
    let secret_name = format!("bootstrap-{pool}");
    let sandbox = Sandbox::new(&stack)?;
    let version_id = sandbox
        .set_key_vault_secret(&vault, &secret_name, &text)
        .await?;
    let uri = format!("https://{vault}.vault.azure.net/secrets/{secret_name}");
    ensure!(
        version_id.starts_with(&format!("{uri}/")),
        "SetSecret's id {version_id} is not a version of {uri}"
    );
    let result = scenario(&stack, &task_queue, &pool, &uri, &token, &worker).await;
    clean_up_pool(&stack, &task_queue, &pool).await;
    result
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    uri: &str,
    token: &str,
    worker: &KillableWorker,
) -> Result<()> {
    let pool_file = from_key_vault(stack, pool, uri)?;
    let machine = format!("{pool}-joins");
    let created = create_machine(stack, task_queue, &pool_file, &machine, &["--wait"])?;
    created.expect_code(0)?;
    let mut outputs: Vec<(String, CliResult)> = vec![("machine create".to_owned(), created)];
    let joined = node(&stack.kube_client().await?, &machine)
        .await?
        .context("the created machine has no Node")?;
    let labels = joined.metadata.labels.unwrap_or_default();
    ensure!(
        labels.get(LABEL.0).map(String::as_str) == Some(LABEL.1),
        "the Node lacks the label the Key Vault bootstrap sets: {labels:?}"
    );
    for args in [
        vec!["machine", "status", machine.as_str()],
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
        ids.iter().any(|id| id.starts_with("create/")),
        "no create run among {ids:?}"
    );
    for run in &runs {
        if run.id.starts_with("create/") {
            ensure!(
                !json_mentions(&run.history, uri).is_empty(),
                "{}'s history does not name the secret URI: the scan sees nothing",
                run.id
            );
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_vault_secret_fails_the_create_naming_it_and_leaves_nothing() -> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let pool = format!("km{}", &suffix[..6]);
    let task_queue = unique_task_queue("keyvault-missing");
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let uri = format!("https://v{pool}.vault.azure.net/secrets/absent-{pool}");
    let pool_file = from_key_vault(&stack, &pool, &uri)?;
    let machine = format!("{pool}-nosecret");
    let created = create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])?;
    created.expect_code(3)?;
    ensure!(
        created.stderr.contains(&format!(
            "the bootstrap Key Vault secret {uri} does not exist: create it (az keyvault secret set --vault-name v{pool} --name absent-{pool} --file <file>)"
        )),
        "the failure names the secret and the fix: {}",
        created.stderr
    );
    nothing_left(&stack, &machine).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_the_vault_does_not_accept_fails_the_create_naming_the_role() -> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let pool = format!("kd{}", &suffix[..6]);
    let task_queue = unique_task_queue("keyvault-denied");
    // The ARM token is right, the Key Vault token is not.
    let _worker = KillableWorker::start_with_env(
        &stack,
        &task_queue,
        &task_queue,
        &[("NODEWRIGHT_KEYVAULT_TOKEN", "not-the-sandbox-token")],
    )?;
    let vault = format!("v{pool}");
    let secret_name = format!("bootstrap-{pool}");
    Sandbox::new(&stack)?
        .set_key_vault_secret(&vault, &secret_name, "#!/bin/bash\nexec /usr/bin/kubelet\n")
        .await?;
    let uri = format!("https://{vault}.vault.azure.net/secrets/{secret_name}");
    let pool_file = from_key_vault(&stack, &pool, &uri)?;
    let machine = format!("{pool}-denied");
    let created = create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])?;
    created.expect_code(3)?;
    ensure!(
        created.stderr.contains(&format!(
            "Key Vault did not accept the worker's Azure identity for the bootstrap secret {uri} (401)"
        )) && created.stderr.contains("the role Key Vault Secrets User"),
        "the failure names the identity and the role: {}",
        created.stderr
    );
    nothing_left(&stack, &machine).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_key_vault_secret_fails_the_create_naming_the_fix() -> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let pool = format!("ko{}", &suffix[..6]);
    let task_queue = unique_task_queue("keyvault-disabled");
    let _worker = KillableWorker::start(&stack, &task_queue)?;
    let vault = format!("v{pool}");
    let secret_name = format!("bootstrap-{pool}");
    let body = serde_json::json!({
        "value": "#!/bin/bash\nexec /usr/bin/kubelet\n",
        "attributes": { "enabled": false },
    });
    Sandbox::new(&stack)?
        .put_key_vault_secret(&vault, &secret_name, &body)
        .await?;
    let uri = format!("https://{vault}.vault.azure.net/secrets/{secret_name}");
    let pool_file = from_key_vault(&stack, &pool, &uri)?;
    let machine = format!("{pool}-off");
    let created = create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])?;
    created.expect_code(3)?;
    ensure!(
        created.stderr.contains(&format!(
            "the worker's Azure identity may not read the bootstrap Key Vault secret {uri} (403 Forbidden): the secret is disabled: enable it (az keyvault secret set-attributes --vault-name {vault} --name {secret_name} --enabled true)"
        )),
        "the failure names the secret and the fix: {}",
        created.stderr
    );
    nothing_left(&stack, &machine).await
}

/// The pool file of `pool` (the stack's test template, creation timeout 30s) with its bootstrap
/// given by the Key Vault secret `uri`.
fn from_key_vault(stack: &Stack, pool: &str, uri: &str) -> Result<std::path::PathBuf> {
    let pool_file = write_pool_file(stack, pool, "30s")?;
    let inline = std::fs::read_to_string(&pool_file)?;
    let by_uri = inline.replace(
        "    bootstrap: |\n      #!/bin/bash\n      exec /usr/bin/kubelet --cloud-provider=external <<REGISTER_WITH_TAINTS>>\n",
        &format!("    bootstrapKeyVaultSecret:\n      secretUri: {uri}\n"),
    );
    ensure!(
        by_uri != inline,
        "the pool file's bootstrap was not replaced"
    );
    std::fs::write(&pool_file, by_uri)?;
    Ok(pool_file)
}

/// No VM, NIC, disk or Node of `machine`.
async fn nothing_left(stack: &Stack, machine: &str) -> Result<()> {
    let left = Sandbox::new(stack)?.machine_resources(machine).await?;
    ensure!(left.is_empty(), "the failed create left {left:?}");
    let joined = node(&stack.kube_client().await?, machine).await?;
    ensure!(
        joined.is_none(),
        "the failed create left the Node {machine}"
    );
    Ok(())
}
