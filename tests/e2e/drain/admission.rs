//! Admission policies that refuse a drain's requests (issue 30, item 2), on the stack's real
//! apiserver with a real ValidatingAdmissionPolicy (CEL, no webhook server needed), scoped to
//! this test's namespace and the pods labelled `app: frozen`:
//!
//! 1. A policy that denies evicting the pod (403, as a change freeze would): the drain does not
//!    fail on a 403 that is not the worker's missing permission; it retries until its deadline
//!    (the status names the policy's denial), then force mode deletes the pod (the policy does
//!    not cover DELETE) and the drain completes.
//! 2. A policy that denies evicting and deleting the pod: `machine delete A --wait` drains, force
//!    mode cannot delete the pod and says so (a warning naming the pod), and the deletion goes
//!    on: the VM, its NIC and OS disk and the Node are gone. Force mode is best effort.
//!
//! Each case removes its policy before it cleans up (the policy would refuse the clean-up's
//! deletions too).

use std::time::Duration;

use super::common::{DrainScene, cli, wait_drain};
use anyhow::{Context, Result, ensure};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, EvictParams, PostParams};
use nodewright_model::drain::{DrainMode, PodState};
use nodewright_model::machine::Outcome;
use nodewright_tests::documents::{DrainLookup, shown};
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{CliResult, MachineStatusDocument, Sandbox, node};
use nodewright_tests::workloads::{Placement, Workload};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);

/// The label of the pods the policies guard.
const FROZEN: &str = "frozen";

/// The message the policies deny with.
const FREEZE_MESSAGE: &str = "change freeze: pods labelled app=frozen stay where they are";

/// A ValidatingAdmissionPolicy and its binding, which the test removes before its clean-up.
struct Freeze {
    kube: kube::Client,
    name: String,
}

impl Freeze {
    /// Denies `operations` (`CREATE` of `pods/eviction`, `DELETE` of `pods`) of the pods
    /// labelled `app: frozen` in `namespace`, with HTTP 403 (reason Forbidden).
    async fn install(kube: &kube::Client, namespace: &str, deny_delete: bool) -> Result<Self> {
        let name = format!("nodewright-e2e-freeze-{}", unique_suffix());
        let mut rules = vec![json!({
            "apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["pods/eviction"],
        })];
        if deny_delete {
            rules.push(json!({
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["DELETE"], "resources": ["pods"],
            }));
        }
        // An Eviction carries no labels: the policy reads the pod's name from it and guards
        // only the frozen pods, whose names start with "frozen-".
        let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": { "name": name },
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "namespaceSelector": {
                        "matchLabels": { "kubernetes.io/metadata.name": namespace }
                    },
                    "resourceRules": rules,
                },
                "validations": [{
                    "expression": format!("!request.name.startsWith('{FROZEN}-')"),
                    "message": FREEZE_MESSAGE,
                    "reason": "Forbidden",
                }],
            },
        }))?;
        let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": { "name": name },
            "spec": { "policyName": name, "validationActions": ["Deny"] },
        }))?;
        let policies: Api<ValidatingAdmissionPolicy> = Api::all(kube.clone());
        let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(kube.clone());
        policies.create(&PostParams::default(), &policy).await?;
        bindings.create(&PostParams::default(), &binding).await?;
        Ok(Self {
            kube: kube.clone(),
            name,
        })
    }

    /// Removes the policy and its binding; reports failures without failing.
    async fn remove(&self) {
        let policies: Api<ValidatingAdmissionPolicy> = Api::all(self.kube.clone());
        let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(self.kube.clone());
        let params = DeleteParams::default();
        if let Err(error) = bindings.delete(&self.name, &params).await {
            eprintln!("cleanup: deleting binding {}: {error}", self.name);
        }
        if let Err(error) = policies.delete(&self.name, &params).await {
            eprintln!("cleanup: deleting policy {}: {error}", self.name);
        }
    }

    /// Waits until the apiserver enforces the policy: a dry-run eviction of `pod` is denied
    /// with its message (policies are loaded asynchronously, within a second or so; a dry run
    /// goes through admission and evicts nothing).
    async fn wait_enforced(&self, namespace: &str, pod: &str) -> Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.kube.clone(), namespace);
        let params = EvictParams {
            post_options: PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            ..EvictParams::default()
        };
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let text = match pods.evict(pod, &params).await {
                Ok(status) => format!("allowed: {}", status.message),
                Err(error) => error.to_string(),
            };
            if text.contains(FREEZE_MESSAGE) {
                return Ok(());
            }
            ensure!(
                tokio::time::Instant::now() < deadline,
                "the policy {} was not enforced within {WAIT:?}: {text}",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The pool's drain settings with `timeout`: quick PDB retries, no NotReady force.
fn settings(timeout: &str) -> [(&str, &str); 5] {
    [
        ("timeout", timeout),
        ("pdbRetryInterval", "2s"),
        ("volumeDetachTimeout", "30s"),
        ("volumeAttachTimeout", "30s"),
        ("forceAfterUnhealthy", "10m"),
    ]
}

/// A bare pod `frozen-<n>` on `node` (bare: no controller recreates it elsewhere).
fn frozen_pod(index: u32, node: &str) -> Workload {
    Workload::new(&format!("{FROZEN}-{index}"), 1, Placement::node(node))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_denied_by_an_admission_policy_is_retried_until_force_mode() -> Result<()> {
    let scene = DrainScene::<1>::start("drain-admission", "da", &settings("20s")).await?;
    let mut freeze = None;
    let result = denied_eviction(&scene, &mut freeze).await;
    if let Some(freeze) = freeze {
        freeze.remove().await;
    }
    scene.finish(result).await
}

async fn denied_eviction(scene: &DrainScene<1>, freeze: &mut Option<Freeze>) -> Result<()> {
    let DrainScene {
        stack,
        task_queue,
        machines: [node_a],
        workloads,
        ..
    } = scene;
    let namespace = workloads.namespace().to_owned();
    scene.create_machines().await?;
    let pod = frozen_pod(1, node_a);
    workloads.bare_pod(&pod).await?;
    let name = format!("{FROZEN}-1");
    workloads
        .wait_app_running(&name, 1, Some(node_a), WAIT)
        .await?;
    let installed = freeze.insert(Freeze::install(workloads.client(), &namespace, false).await?);
    installed.wait_enforced(&namespace, &name).await?;

    cli(
        stack,
        task_queue,
        &["machine", "drain", node_a, "--local-data", "evict"],
    )
    .await?
    .expect_code(0)?;
    let key = format!("{namespace}/{name}");
    let denied = wait_drain(
        stack,
        task_queue,
        node_a,
        "the frozen pod's eviction denied and retried",
        WAIT,
        |doc| {
            doc.status.pod(&key).is_some_and(|p| {
                p.state == PodState::Blocked
                    && p.evictions >= 2
                    && p.detail
                        .as_deref()
                        .is_some_and(|d| d.contains("admission") && d.contains(FREEZE_MESSAGE))
            })
        },
    )
    .await?;
    ensure!(
        denied.is_running() && denied.status.mode == DrainMode::Graceful,
        "a policy's 403 does not fail the drain: it is retried before the deadline: {denied}"
    );

    let done = wait_drain(stack, task_queue, node_a, "the drain to end", WAIT, |doc| {
        !doc.is_running()
    })
    .await?;
    let status = &done.status;
    ensure!(
        done.run_status == "completed" && status.run.outcome == Outcome::Succeeded,
        "the drain completed: {done}"
    );
    ensure!(
        matches!(&status.mode, DrainMode::Force { reason } if reason.contains("deadline")),
        "force mode at the deadline: {done}"
    );
    let entry = status.pod(&key).context("the frozen pod in the status")?;
    ensure!(
        entry.state == PodState::ForceDeleted,
        "force mode deleted the frozen pod: {}",
        shown(entry)
    );
    ensure!(
        workloads.pods_on(node_a).await?.is_empty(),
        "no pod of the test left on {node_a}"
    );
    println!("denied {} times, then {}", entry.evictions, shown(entry));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_force_mode_may_not_delete_does_not_stop_the_machine_deletion() -> Result<()> {
    let scene = DrainScene::<1>::start("drain-admission-delete", "dx", &settings("15s")).await?;
    let mut freeze = None;
    let result = denied_deletion(&scene, &mut freeze).await;
    if let Some(freeze) = freeze {
        freeze.remove().await;
    }
    scene.finish(result).await
}

async fn denied_deletion(scene: &DrainScene<1>, freeze: &mut Option<Freeze>) -> Result<()> {
    let DrainScene {
        stack,
        task_queue,
        machines: [node_a],
        workloads,
        ..
    } = scene;
    let namespace = workloads.namespace().to_owned();
    scene.create_machines().await?;
    let sandbox = Sandbox::new(stack)?;
    let before = sandbox.machine_resources(node_a).await?;
    ensure!(
        before.vms.len() == 1 && !before.nics.is_empty() && !before.disks.is_empty(),
        "{node_a}'s VM, NIC and OS disk exist before the delete: {before:?}"
    );
    workloads.bare_pod(&frozen_pod(1, node_a)).await?;
    let name = format!("{FROZEN}-1");
    workloads
        .wait_app_running(&name, 1, Some(node_a), WAIT)
        .await?;
    let installed = freeze.insert(Freeze::install(workloads.client(), &namespace, true).await?);
    installed.wait_enforced(&namespace, &name).await?;

    let deleted: CliResult =
        cli(stack, task_queue, &["machine", "delete", node_a, "--wait"]).await?;
    deleted.expect_code(0)?;
    let doc: MachineStatusDocument = cli(
        stack,
        task_queue,
        &["machine", "status", node_a, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .parse()?;
    ensure!(
        doc.run_status == "completed",
        "the machine's delete completed: {}",
        doc.run_status
    );
    let key = format!("{namespace}/{name}");
    let drain = doc.drain.context("the delete's drain status")?;
    ensure!(
        matches!(&drain.mode, DrainMode::Force { .. }),
        "the delete's drain reached force mode: {:?}",
        drain.mode
    );
    ensure!(
        drain
            .warnings
            .iter()
            .any(|w| w.contains(&key) && w.contains("could not delete")),
        "a warning names the pod force mode could not delete: {:?}",
        drain.warnings
    );

    // The deletion went on: nothing of the machine is left in Azure or Kubernetes.
    let leftovers = sandbox.machine_resources(node_a).await?;
    ensure!(
        leftovers.is_empty(),
        "nothing of {node_a} left in the sandbox: {leftovers:?}"
    );
    ensure!(
        node(workloads.client(), node_a).await?.is_none(),
        "{node_a}'s Node is gone"
    );
    // The policy kept the pod object (its Node is gone: the pod garbage collector would remove
    // it, but the policy refuses that too until the clean-up removes the policy).
    let pods: Api<Pod> = Api::namespaced(workloads.client().clone(), &namespace);
    ensure!(
        pods.get_opt(&name).await?.is_some(),
        "the pod the policy protects still exists: force mode reported it instead of failing"
    );
    println!("warnings: {:?}", drain.warnings);
    Ok(())
}
