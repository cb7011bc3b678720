//! Encrypted payloads: a worker and a CLI given the namespace's key file send every payload
//! encrypted. A create whose pool holds its bootstrap inline (a join token in it) leaves no token
//! and no plain spec in its history as `temporal workflow show` prints it without the key, while
//! the CLI with the key works as usual; a CLI without the key, or with a wrong one, is refused
//! with a message naming the key and the setting. `nodewright codec-server` with the key decodes
//! for the real Temporal CLI (`--codec-endpoint`), and refuses a request without its token.
//!
//! With the codec on and a join token inline in the bootstrap, the token is in no history (every
//! string and base64 payload scanned), no worker log line (debug level) and no CLI output after a
//! rollout, a failed create (ARM refuses the VM) and a create cancelled once its VM was built; the
//! scan itself is checked: through the codec server the token is back in the create's input.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use nodewright_tests::codec::{CodecServer, free_port, key_file};
use nodewright_tests::documents::shown;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{
    CliResult, KillableWorker, MachineStatusDocument, Sandbox, cli_with_env, write_pool_file,
};
use nodewright_tests::secrets::{SecretScan, json_mentions};
use nodewright_tests::stack::{history_json, history_json_with};
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};
use serde_json::json;

use crate::rollout::common::{pool_machines, terminate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_encryption_on_a_history_holds_no_plain_input_and_a_cli_without_the_key_is_refused()
-> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let pool = format!("en{}", &suffix[..6]);
    let task_queue = unique_task_queue("encryption");
    let key_id = format!("k-{suffix}");
    let keys = key_file(&key_id, &suffix)?;
    let keys = keys.to_string_lossy().into_owned();
    let with_keys = [("NODEWRIGHT_ENCRYPTION_KEYS_FILE", keys.as_str())];
    let _worker = KillableWorker::start_with_env(&stack, &task_queue, &task_queue, &with_keys)?;
    let machine = format!("{pool}-enc");

    let result = scenario(&stack, &task_queue, &pool, &machine, &key_id, &with_keys).await;

    let _ = CliResult::run_with_env(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--skip-drain", "--wait"],
        &with_keys,
    );
    result
}

async fn scenario(
    stack: &Stack,
    task_queue: &str,
    pool: &str,
    machine: &str,
    key_id: &str,
    with_keys: &[(&str, &str)],
) -> Result<()> {
    // An inline bootstrap with a join token: the CLI warns, the history holds none of it.
    let token = format!("{}.{}", &key_id[2..8], "0123456789abcdef");
    let pool_file = write_pool_file(stack, pool, "60s")?;
    let inline = std::fs::read_to_string(&pool_file)?;
    let text = inline.replace(
        "      exec /usr/bin/kubelet --cloud-provider=external <<REGISTER_WITH_TAINTS>>\n",
        &format!(
            "      kubeadm join 10.0.0.4:6443 --token {token}\n      exec /usr/bin/kubelet --cloud-provider=external <<REGISTER_WITH_TAINTS>>\n"
        ),
    );
    ensure!(text != inline, "the pool file's bootstrap was not replaced");
    std::fs::write(&pool_file, text)?;
    let path = pool_file.to_string_lossy().into_owned();
    let create = [
        "machine", "create", "--pool", &path, "--name", machine, "--wait",
    ];
    let created = CliResult::run_with_env(stack, task_queue, &create, with_keys)?;
    created.expect_code(0)?;
    ensure!(
        created
            .stderr
            .contains("looks like it holds a Kubernetes bootstrap token")
            && !created.stderr.contains(&token),
        "the CLI warns about the inline token without printing it: {}",
        created.stderr
    );

    let id = format!("create/{}/{machine}", stack.cluster);
    let history = history_json(stack, &id).await?;
    for plain in [token.as_str(), "kubeadm join"] {
        let found = json_mentions(&history, plain);
        ensure!(
            found.is_empty(),
            "{id}'s history shows {plain:?} at {found:?}"
        );
    }
    // The spec appears only in the run's UI summary (user metadata, which the SDK sends as it
    // is: pool, machine, VM size), never in an input, result or heartbeat.
    let spec: Vec<String> = json_mentions(&history, "Standard_D2s_v5")
        .into_iter()
        .filter(|path| !path.contains(".userMetadata."))
        .collect();
    ensure!(
        spec.is_empty(),
        "{id}'s history shows the plain spec at {spec:?}"
    );
    ensure!(
        !json_mentions(&history, "binary/encrypted").is_empty()
            && !json_mentions(&history, key_id).is_empty(),
        "{id}'s payloads are not marked encrypted with {key_id}"
    );

    // The CLI with the key reads the run; without it, or with a wrong one, it is refused.
    let status = ["--output", "json", "machine", "status", machine];
    let read: MachineStatusDocument =
        CliResult::run_with_env(stack, task_queue, &status, with_keys)?
            .expect_code(0)?
            .parse()?;
    ensure!(
        read.status.machine == machine,
        "the CLI with the key reads {machine}'s run: {}",
        shown(&read)
    );
    let without = CliResult::run(stack, task_queue, &status)?;
    ensure!(
        without.code != Some(0)
            && without
                .stderr
                .contains(&format!("a payload is encrypted (key \"{key_id}\")"))
            && without.stderr.contains("NODEWRIGHT_ENCRYPTION_KEYS_FILE"),
        "a CLI without the key: exit {:?}\n{}",
        without.code,
        without.stderr
    );
    // The codec server with the key: the real Temporal CLI, pointed at it, shows the input
    // decoded (the join line is back); a request without its token is refused.
    let decoded = show_through_codec_server(stack, &id, with_keys).await?;
    ensure!(
        !json_mentions(&decoded, "kubeadm join").is_empty(),
        "`temporal workflow show --codec-endpoint` did not decode the input"
    );

    let wrong = key_file(key_id, "wrongwrongwrong")?;
    let wrong = wrong.to_string_lossy().into_owned();
    let with_wrong = [("NODEWRIGHT_ENCRYPTION_KEYS_FILE", wrong.as_str())];
    let refused = CliResult::run_with_env(stack, task_queue, &status, &with_wrong)?;
    ensure!(
        refused.code != Some(0)
            && refused
                .stderr
                .contains(&format!("does not decrypt with key \"{key_id}\"")),
        "a CLI with a wrong key: exit {:?}\n{}",
        refused.code,
        refused.stderr
    );
    Ok(())
}

/// `temporal workflow show --codec-endpoint` through `nodewright codec-server` (with the keys
/// in `env` and a bearer token), after checking that a request without the token is refused.
async fn show_through_codec_server(
    stack: &Stack,
    workflow_id: &str,
    env: &[(&str, &str)],
) -> Result<serde_json::Value> {
    let mut env = env.to_vec();
    env.push(("NODEWRIGHT_CODEC_TOKEN", "e2e-token"));
    let server = CodecServer::start(stack, free_port()?, &env, &[]).await?;
    let endpoint = server.endpoint();
    let refused = reqwest::Client::new()
        .post(format!("{endpoint}/decode"))
        .body(r#"{"payloads":[]}"#)
        .send()
        .await?;
    ensure!(
        refused.status() == reqwest::StatusCode::UNAUTHORIZED,
        "a request without the token: {}",
        refused.status()
    );
    history_json_with(
        stack,
        workflow_id,
        &[
            "--codec-endpoint",
            endpoint,
            "--codec-auth",
            "Bearer e2e-token",
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_encryption_on_an_inline_token_is_in_no_history_log_or_output_after_a_rollout_a_failed_and_a_cancelled_create()
-> Result<()> {
    let stack = Stack::load()?;
    let suffix = unique_suffix();
    let task_queue = unique_task_queue("encryption-runs");
    let key_id = format!("k-{suffix}");
    let keys = key_file(&key_id, &suffix)?;
    let keys = keys.to_string_lossy().into_owned();
    let with_keys = [("NODEWRIGHT_ENCRYPTION_KEYS_FILE", keys.as_str())];
    let worker = KillableWorker::start_with_full_log_and_env(&stack, &task_queue, &with_keys)?;
    // A bootstrap token's form, unique to this run: [a-z0-9]{6}.[a-z0-9]{16}.
    let token = format!("{}.{}{}", &suffix[..6], &suffix, &suffix[..8]);
    let runs = Runs {
        stack: &stack,
        task_queue: &task_queue,
        with_keys: &with_keys,
        token: &token,
        // The rollout's pool, and a second pool for the failed and the cancelled create (a
        // rollout counts every machine of its pool).
        rolled: format!("er{}", &suffix[..6]),
        other: format!("ef{}", &suffix[..6]),
    };
    let (failing, cancelled) = (runs.machine("fails"), runs.machine("cancel"));
    let sandbox = Sandbox::new(&stack)?;
    let faults = [
        sandbox
            .add_fault(json!({
                "kind": "fail_operation", "operation": "vm.put", "vm": failing,
                "code": "AllocationFailed",
                "message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this region.",
            }))
            .await?,
        sandbox
            .add_fault(json!({ "kind": "never_joins", "vm": cancelled }))
            .await?,
    ];

    let result = runs.scenario(&worker, &sandbox, &failing, &cancelled).await;

    for fault in faults {
        sandbox.remove_fault(fault).await?;
    }
    runs.clean_up().await;
    result
}

/// The runs of the token test: two pools whose inline bootstrap holds `token`, a worker and
/// CLI with the keys.
struct Runs<'a> {
    stack: &'a Stack,
    task_queue: &'a str,
    with_keys: &'a [(&'a str, &'a str)],
    token: &'a str,
    rolled: String,
    other: String,
}

impl Runs<'_> {
    /// The machine `<other pool>-<name>`.
    fn machine(&self, name: &str) -> String {
        format!("{}-{name}", self.other)
    }

    /// `nodewright ARGS` with the keys, off the async threads.
    async fn cli(&self, args: &[&str]) -> Result<CliResult> {
        cli_with_env(self.stack, self.task_queue, args, self.with_keys).await
    }

    /// The pool file of `pool` (one replica, creation timeout 60s), a join line with the token
    /// in its inline bootstrap.
    fn pool_file(&self, pool: &str) -> Result<String> {
        let pool_file = write_pool_file(self.stack, pool, "60s")?;
        let text = std::fs::read_to_string(&pool_file)?;
        let with_token = text.replace("  replicas: 2\n", "  replicas: 1\n").replace(
            "      exec /usr/bin/kubelet --cloud-provider=external <<REGISTER_WITH_TAINTS>>\n",
            &format!(
                "      kubeadm join 10.0.0.4:6443 --token {} --discovery-token-ca-cert-hash sha256:00\n      exec /usr/bin/kubelet --cloud-provider=external <<REGISTER_WITH_TAINTS>>\n",
                self.token
            ),
        );
        ensure!(
            with_token != text,
            "the pool file's bootstrap was not replaced"
        );
        std::fs::write(&pool_file, with_token)?;
        Ok(pool_file.to_string_lossy().into_owned())
    }

    async fn scenario(
        &self,
        worker: &KillableWorker,
        sandbox: &Sandbox,
        failing: &str,
        cancelled: &str,
    ) -> Result<()> {
        let rolled_file = self.pool_file(&self.rolled)?;
        let other_file = self.pool_file(&self.other)?;
        let mut outputs: Vec<(String, CliResult)> = Vec::new();

        // The three at once: a rollout (one machine created), a create ARM refuses, a create
        // cancelled once its VM exists (its Node never joins).
        let rollout_args = ["pool", "rollout", "--pool", &rolled_file, "--wait"];
        let rollout = self.cli(&rollout_args);
        let failed_args = [
            "machine",
            "create",
            "--pool",
            &other_file,
            "--name",
            failing,
            "--wait",
        ];
        let failed = self.cli(&failed_args);
        let cancel = async {
            let started = self
                .cli(&[
                    "machine",
                    "create",
                    "--pool",
                    &other_file,
                    "--name",
                    cancelled,
                ])
                .await?;
            started.expect_code(0)?;
            eventually(
                &format!("{cancelled}'s VM to exist"),
                Duration::from_secs(90),
                Duration::from_millis(300),
                || async {
                    let made = sandbox.machine_resources(cancelled).await?;
                    Ok((!made.vms.is_empty()).then_some(()))
                },
            )
            .await?;
            let cancel = self
                .cli(&["machine", "cancel", cancelled, "--wait"])
                .await?;
            anyhow::Ok((started, cancel))
        };
        let (rolled, failed, cancel) = tokio::join!(rollout, failed, cancel);
        let rolled = rolled?;
        rolled.expect_code(0).with_context(|| worker.log_tail())?;
        let failed = failed?;
        failed.expect_code(3).with_context(|| worker.log_tail())?;
        ensure!(
            failed.stderr.contains("AllocationFailed"),
            "the failed create does not say why: {}",
            failed.stderr
        );
        let (started, cancel) = cancel?;
        cancel.expect_code(0).with_context(|| worker.log_tail())?;
        let left = sandbox.machine_resources(cancelled).await?;
        ensure!(left.is_empty(), "the cancelled create left {left:?}");
        let left = sandbox.machine_resources(failing).await?;
        ensure!(left.is_empty(), "the failed create left {left:?}");
        outputs.push(("pool rollout".to_owned(), rolled));
        outputs.push(("failed machine create".to_owned(), failed));
        outputs.push(("machine create (cancelled)".to_owned(), started));
        outputs.push(("machine cancel".to_owned(), cancel));

        let rolled_machines = pool_machines(self.stack, &self.rolled).await?;
        ensure!(
            rolled_machines.len() == 1,
            "the rollout made {rolled_machines:?}, expected one machine"
        );
        for args in [
            vec!["machine", "status", rolled_machines[0].as_str()],
            vec!["machine", "status", failing],
            vec!["pool", "status", self.rolled.as_str()],
            vec!["pool", "rollout", "status", self.rolled.as_str()],
            vec!["runs", "--pool", self.rolled.as_str()],
            vec!["runs", "--pool", self.other.as_str()],
        ] {
            let result = self.cli(&args).await?;
            outputs.push((args.join(" "), result));
        }
        self.scan(&outputs, &worker.log_text(), cancelled).await
    }

    /// No output, no log line and no run of both pools holds the token (every history string,
    /// base64 decoded too), nor a run the bootstrap's `kubeadm join`; the runs' payloads are
    /// encrypted; through the codec server, the create's input holds the token (the scan would
    /// see it).
    async fn scan(
        &self,
        outputs: &[(String, CliResult)],
        worker_log: &str,
        cancelled: &str,
    ) -> Result<()> {
        let runs = SecretScan {
            stack: self.stack,
            task_queue: self.task_queue,
            env: self.with_keys,
            secret: self.token,
            named: "the bootstrap token",
            outputs,
            worker_log,
            log_shows: &[cancelled, "DEBUG"],
            log_not_captured: &format!(
                "the worker's debug log is not captured (no line names {cancelled})"
            ),
            pools: &[&self.rolled, &self.other],
        }
        .assert_nowhere()
        .await?;
        let ids: Vec<&str> = runs.iter().map(|run| run.id.as_str()).collect();
        let rollout = format!("rollout/{}/{}", self.stack.cluster, self.rolled);
        ensure!(
            ids.len() >= 4 && ids.contains(&rollout.as_str()),
            "expected the rollout, its create and the two creates among {ids:?}"
        );
        for run in &runs {
            let id = &run.id;
            let leaks = json_mentions(&run.history, "kubeadm join");
            ensure!(
                leaks.is_empty(),
                "{id}'s history holds the bootstrap's `kubeadm join` at {leaks:?}"
            );
            ensure!(
                !json_mentions(&run.history, "binary/encrypted").is_empty(),
                "{id}'s payloads are not encrypted"
            );
        }
        let create = format!("create/{}/{}", self.stack.cluster, self.machine("fails"));
        let decoded = show_through_codec_server(self.stack, &create, self.with_keys).await?;
        ensure!(
            !json_mentions(&decoded, self.token).is_empty(),
            "{create}'s input decoded through the codec server lacks the token: the scan sees nothing"
        );
        Ok(())
    }

    /// Deletes whatever the pools still have (with the keys) and ends a rollout left running.
    async fn clean_up(&self) {
        terminate(
            self.stack,
            &format!("rollout/{}/{}", self.stack.cluster, self.rolled),
        )
        .await;
        for pool in [&self.rolled, &self.other] {
            let Ok(machines) = pool_machines(self.stack, pool).await else {
                continue;
            };
            for machine in machines {
                let deleted = self
                    .cli(&["machine", "delete", &machine, "--skip-drain", "--wait"])
                    .await;
                if let Err(error) = deleted {
                    eprintln!("cleanup: deleting {machine}: {error:#}");
                }
            }
        }
    }
}
