//! `deploy/admission-policy.yaml` on the stack's real apiserver: the ValidatingAdmissionPolicies
//! and their bindings as shipped, with only the names, the matched user and the EDIT values
//! changed for this run (the policy then matches nothing but this run's ServiceAccount, so tests
//! running beside it are not affected). The ServiceAccount holds `deploy/`'s ClusterRole
//! (`rbac::Identity`) and its own token is used, so RBAC allows every request below and only the
//! policy decides:
//!
//! - a Node whose providerID is in another resource group: patch and delete refused with the
//!   policy's message, the Node unchanged;
//! - a Node whose providerID is in the configured group (spelled in another case, as Azure's
//!   cloud provider does): patch and delete allowed;
//! - a pod on a Node named like none of the configured pools' machines: delete refused; a pod on
//!   a machine of the pool: delete allowed.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use nodewright_tests::kube_objects::{KWOK_ANNOTATION, unique_suffix};
use nodewright_tests::{Stack, eventually, stack};
use serde_json::{Value, json};

use crate::rbac::{Identity, kubectl};

/// The user the shipped policy matches.
const SHIPPED_USER: &str = "'system:serviceaccount:nodewright:nodewright-worker'";
const TEST_PODS: [&str; 2] = ["on-foreign", "on-own"];
const SUBSCRIPTION: &str = "00000000-0000-0000-0000-0000000000aa";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_policy_keeps_the_worker_to_nodes_of_its_resource_group() -> Result<()> {
    let stack = Stack::load()?;
    let admin = stack.kube_client().await?;
    let identity = Identity::grant(&stack, &admin, |_| {}).await?;
    let suffix = unique_suffix();
    let policy = Policy {
        suffix: suffix.clone(),
        names: std::sync::Mutex::new(Vec::new()),
        file: stack::repo_root()
            .join("target")
            .join("e2e-admission")
            .join(format!("{suffix}.json")),
    };
    let nodes = TestNodes {
        own: format!("vp{suffix}-bcdfg"),
        foreign: format!("vq{suffix}-bcdfg"),
    };
    let result = check(&stack, &admin, &identity, &policy, &nodes, &suffix).await;
    policy.remove(&stack);
    // The test pods' Nodes have no kubelet once gone: force the pods out so the namespace goes.
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &identity.namespace);
    for name in TEST_PODS {
        let _ = pods
            .delete(name, &DeleteParams::default().grace_period(0))
            .await;
    }
    for name in [&nodes.own, &nodes.foreign] {
        let _ = Api::<Node>::all(admin.clone())
            .delete(name, &DeleteParams::default())
            .await;
    }
    identity.revoke(&admin).await;
    result?;
    identity.ensure_revoked(&admin).await
}

/// This run's copies of the policies (each binding has its policy's name).
struct Policy {
    suffix: String,
    names: std::sync::Mutex<Vec<String>>,
    file: std::path::PathBuf,
}

impl Policy {
    fn remove(&self, stack: &Stack) {
        let names = self
            .names
            .lock()
            .map(|names| names.clone())
            .unwrap_or_default();
        for name in &names {
            for kind in [
                "validatingadmissionpolicybinding",
                "validatingadmissionpolicy",
            ] {
                if let Err(error) = kubectl(stack, &["delete", kind, name, "--ignore-not-found"]) {
                    eprintln!("removing {kind} {name}: {error:#}");
                }
            }
        }
        let _ = std::fs::remove_file(&self.file);
    }
}

struct TestNodes {
    own: String,
    foreign: String,
}

async fn check(
    stack: &Stack,
    admin: &kube::Client,
    identity: &Identity,
    policy: &Policy,
    nodes: &TestNodes,
    suffix: &str,
) -> Result<()> {
    let group = format!("rg-Vap-{suffix}");
    let pool = format!("vp{suffix}");
    install(stack, identity, policy, &group, &pool)?;
    let provider = |group: &str, name: &str| {
        format!(
            "azure:///subscriptions/{SUBSCRIPTION}/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachines/{name}"
        )
    };
    create_node(
        admin,
        &nodes.own,
        &provider(&group.to_lowercase(), &nodes.own),
    )
    .await?;
    create_node(
        admin,
        &nodes.foreign,
        &provider(&format!("rg-other-{suffix}"), &nodes.foreign),
    )
    .await?;
    let message = format!(
        "nodewright-worker may change or delete only Nodes whose spec.providerID names a VM of resource group {group}"
    );
    let label = r#"{"metadata":{"labels":{"nodewright-test/admission":"patched"}}}"#;
    let patch = |node: &str| -> Vec<String> {
        ["patch", "node", node, "--type=merge", "--patch", label]
            .map(str::to_owned)
            .to_vec()
    };
    // The policy takes effect once the apiserver has compiled it: until then a patch passes, so the wait patches another label.
    let probe = |node: &str| -> Vec<String> {
        let probe = r#"{"metadata":{"labels":{"nodewright-test/probe":"patched"}}}"#;
        ["patch", "node", node, "--type=merge", "--patch", probe]
            .map(str::to_owned)
            .to_vec()
    };
    eventually(
        "the policy to refuse the worker's patch of a Node of another resource group",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let output = as_worker(identity, &probe(&nodes.foreign))?;
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            if output.status.success() {
                return Ok(None);
            }
            ensure!(
                stderr.contains(&message)
                    && stderr.contains(&format!("nodewright-worker-nodes-{}", policy.suffix)),
                "the refusal carries the policy's message ({message}):\n{stderr}"
            );
            println!("patch refused: {}", stderr.trim());
            Ok(Some(()))
        },
    )
    .await?;
    let patched = as_worker(identity, &patch(&nodes.foreign))?;
    let stderr = String::from_utf8_lossy(&patched.stderr);
    ensure!(
        !patched.status.success() && stderr.contains(&message),
        "the patch of a Node of another resource group is refused with the policy's message:\n{stderr}"
    );
    let deleted = as_worker(
        identity,
        &["delete", "node", &nodes.foreign].map(str::to_owned),
    )?;
    let stderr = String::from_utf8_lossy(&deleted.stderr);
    ensure!(
        !deleted.status.success() && stderr.contains(&message),
        "the delete of a Node of another resource group is refused with the policy's message:\n{stderr}"
    );
    println!("delete refused: {}", stderr.trim());
    let foreign = Api::<Node>::all(admin.clone())
        .get_opt(&nodes.foreign)
        .await?
        .context("the refused delete left the Node")?;
    ensure!(
        foreign.metadata.deletion_timestamp.is_none()
            && !foreign
                .metadata
                .labels
                .unwrap_or_default()
                .contains_key("nodewright-test/admission"),
        "the Node of another resource group is unchanged"
    );

    expect_success(
        as_worker(identity, &patch(&nodes.own))?,
        "patch of its own Node",
    )?;
    let own = Api::<Node>::all(admin.clone())
        .get(&nodes.own)
        .await?
        .metadata
        .labels
        .unwrap_or_default();
    ensure!(
        own.get("nodewright-test/admission").map(String::as_str) == Some("patched"),
        "the patch of a Node of the configured group (providerID lower-cased) went through"
    );

    // Pods: by their Node's name, the configured pool's machine naming.
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &identity.namespace);
    for (name, node) in [("on-foreign", &nodes.foreign), ("on-own", &nodes.own)] {
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": { "name": name },
                "spec": { "nodeName": node, "containers": [{ "name": "c", "image": "pause" }] },
            }))?,
        )
        .await
        .with_context(|| format!("creating pod {name}"))?;
    }
    let delete_pod = |name: &str| {
        as_worker(
            identity,
            &[
                "delete",
                "pod",
                name,
                "--namespace",
                &identity.namespace,
                "--wait=false",
            ]
            .map(str::to_owned),
        )
    };
    // The pod policy is compiled apart from the Node policy: wait for it with a dry run.
    eventually(
        "the policy to refuse the worker's delete of a pod on another Node",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let output = as_worker(
                identity,
                &[
                    "delete",
                    "pod",
                    "on-foreign",
                    "--namespace",
                    &identity.namespace,
                    "--dry-run=server",
                ]
                .map(str::to_owned),
            )?;
            Ok((!output.status.success()).then_some(()))
        },
    )
    .await?;
    let refused = delete_pod("on-foreign")?;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    ensure!(
        !refused.status.success()
            && stderr.contains("nodewright-worker may delete only pods on its machines"),
        "the delete of a pod on another Node is refused with the policy's message:\n{stderr}"
    );
    println!("pod delete refused: {}", stderr.trim());
    expect_success(delete_pod("on-own")?, "delete of a pod on its machine")?;

    expect_success(
        as_worker(
            identity,
            &["delete", "node", &nodes.own, "--wait=false"].map(str::to_owned),
        )?,
        "delete of its own Node",
    )
}

/// Applies the shipped policies and bindings, renamed for this run (`<name>-<suffix>`) and
/// matching only `identity`, with the variables `group` and `pool` in place of the EDIT values.
fn install(
    stack: &Stack,
    identity: &Identity,
    policy: &Policy,
    group: &str,
    pool: &str,
) -> Result<()> {
    let path = stack::repo_root()
        .join("deploy")
        .join("admission-policy.yaml");
    let text = kubectl(
        stack,
        &[
            "create",
            "--dry-run=client",
            "--output=json",
            "--filename",
            &path.to_string_lossy(),
        ],
    )?;
    // One JSON object per YAML document.
    let mut items = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .collect::<Result<Vec<_>, _>>()
        .context("deploy/admission-policy.yaml")?;
    let renamed = |name: &Value| format!("{}-{}", name.as_str().unwrap_or_default(), policy.suffix);
    let mut edited = Vec::new();
    for item in items.iter_mut() {
        let kind = item["kind"].as_str().unwrap_or_default().to_owned();
        let name = renamed(&item["metadata"]["name"]);
        item["metadata"]["name"] = json!(name);
        match kind.as_str() {
            "ValidatingAdmissionPolicy" => {
                let conditions = item["spec"]["matchConditions"]
                    .as_array_mut()
                    .context("the policy has matchConditions")?;
                ensure!(conditions.len() == 1, "one match condition: the user");
                let expression = conditions[0]["expression"].as_str().unwrap_or_default();
                ensure!(
                    expression.contains(SHIPPED_USER),
                    "the policy matches {SHIPPED_USER}: {expression}"
                );
                conditions[0]["expression"] =
                    json!(expression.replace(SHIPPED_USER, &format!("'{}'", identity.username())));
                for variable in item["spec"]["variables"]
                    .as_array_mut()
                    .context("the policy has variables")?
                {
                    let value = match variable["name"].as_str() {
                        Some("subscriptionId") => SUBSCRIPTION,
                        Some("resourceGroup") => group,
                        Some("pools") => pool,
                        _ => continue,
                    };
                    variable["expression"] = json!(format!("'{value}'"));
                    edited.push(variable["name"].clone());
                }
                policy
                    .names
                    .lock()
                    .map_err(|_| anyhow::anyhow!("lock"))?
                    .push(name);
            }
            "ValidatingAdmissionPolicyBinding" => {
                item["spec"]["policyName"] = json!(renamed(&item["spec"]["policyName"]));
            }
            other => bail!("deploy/admission-policy.yaml holds a {other}"),
        }
    }
    ensure!(
        items.len() == 4 && edited.len() == 3,
        "two policies with their bindings, and the three EDIT variables ({} objects, {} variables)",
        items.len(),
        edited.len()
    );
    if let Some(dir) = policy.file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let list = json!({ "apiVersion": "v1", "kind": "List", "items": items });
    std::fs::write(&policy.file, serde_json::to_string_pretty(&list)?)?;
    kubectl(
        stack,
        &["apply", "--filename", &policy.file.to_string_lossy()],
    )?;
    Ok(())
}

async fn create_node(admin: &kube::Client, name: &str, provider_id: &str) -> Result<()> {
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": name, "annotations": { KWOK_ANNOTATION: "fake" } },
        "spec": { "providerID": provider_id },
    }))?;
    Api::<Node>::all(admin.clone())
        .create(&PostParams::default(), &node)
        .await
        .with_context(|| format!("creating Node {name}"))?;
    Ok(())
}

/// Runs kubectl with the ServiceAccount's token.
fn as_worker(identity: &Identity, args: &[String]) -> Result<Output> {
    let kubeconfig: &Path = identity.kubeconfig();
    Ok(Command::new(stack::kubectl()?)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()?)
}

fn expect_success(output: Output, what: &str) -> Result<()> {
    ensure!(
        output.status.success(),
        "{what} is allowed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}
