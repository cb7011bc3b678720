//! `nodewright-node-agent` against the local stack, with nothing but the rights `deploy/`
//! gives it: the ServiceAccount, ClusterRole and ClusterRoleBinding of `deploy/node-agent.yaml`
//! (renamed for this run) and its ValidatingAdmissionPolicy (matching only this run's
//! ServiceAccount), through a token bound to a pod on the machine's Node, as the DaemonSet's pod
//! gets one (it carries the Node's name in `authentication.kubernetes.io/node-name`).
//!
//! A machine of a fresh pool is created (`machine create --wait`): a sandbox VM and a Node with
//! its providerID. The agent reads that VM's metadata service in the sandbox
//! (`--imds-url-from-provider-id`):
//!
//! - at once the Node gets the condition `nodewright.io/VMEventScheduled` False
//!   (`NoVMEventScheduled`) and the annotation `[]`;
//! - the policy refuses the agent's token a label change of its own Node and any write to
//!   another Node;
//! - a `Redeploy` scheduled through `POST /sandbox/scheduled-events` turns the condition True
//!   (reason `Redeploy`, the message naming the EventId), lists it in the annotation and sends
//!   one Event `RedeployScheduled`; a type nodewright does not know (`SpotRebalanceRecommendation`)
//!   is passed through the same way (its Event `SpotRebalanceRecommendationScheduled`);
//! - `nodewright.io/scheduled-event-ack: <EventId>` on the Node makes the agent acknowledge it:
//!   the sandbox's history says `startedBy: acknowledged` by the VM; the unrequested event is
//!   never acknowledged; once the redeploy ended, the condition is False again.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nodewright_tests::binaries::{KillOnDrop, binary};
use nodewright_tests::deploy_objects::Source;
use nodewright_tests::kube_objects::{KWOK_ANNOTATION, create_namespace, unique_suffix};
use nodewright_tests::machines::{
    CliResult, KillableWorker, Sandbox, create_machine, write_pool_file,
};
use nodewright_tests::stack::repo_root;
use nodewright_tests::temporal_worker::unique_task_queue;
use nodewright_tests::{Stack, eventually};
use serde_json::{Value, json};

use crate::rbac::{kubectl, write_kubeconfig};

/// The agent's objects in `deploy/node-agent.yaml`.
const NAME: &str = "nodewright-node-agent";
const CONDITION: &str = "nodewright.io/VMEventScheduled";
const EVENTS_ANNOTATION: &str = "nodewright.io/scheduled-event";
const ACK_ANNOTATION: &str = "nodewright.io/scheduled-event-ack";
/// How long one awaited change may take.
const WAIT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_publishes_announces_and_acknowledges_only_what_is_asked() -> Result<()> {
    let stack = Stack::load()?;
    let admin = stack.kube_client().await?;
    let task_queue = unique_task_queue("nodeagent");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let suffix = unique_suffix();
    let pool = format!("na{suffix}");
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-n7g2t");
    let created = {
        let (stack, task_queue, machine) = (stack.clone(), task_queue.clone(), machine.clone());
        tokio::task::spawn_blocking(move || {
            create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"])
        })
        .await??
    };
    created.expect_code(0).with_context(|| worker.log_tail())?;

    let setup = Setup {
        namespace: format!("na-{suffix}"),
        role: format!("{NAME}-{suffix}"),
        other_node: format!("na{suffix}-other"),
        kubeconfig: repo_root()
            .join("target")
            .join("e2e-node-agent")
            .join(format!("{suffix}.kubeconfig")),
    };
    let result = run(&stack, &admin, &setup, &machine).await;
    setup.remove(&stack, &admin).await;
    let deleted = CliResult::run(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--wait", "--skip-drain"],
    )?;
    result?;
    deleted.expect_code(0).with_context(|| worker.log_tail())?;
    Ok(())
}

async fn run(stack: &Stack, admin: &kube::Client, setup: &Setup, machine: &str) -> Result<()> {
    setup.install(stack, admin, machine).await?;
    let log = setup.kubeconfig.with_extension("log");
    let mut agent = start_agent(stack, &setup.kubeconfig, machine, &log)?;
    let result = drive(stack, admin, setup, machine).await;
    let _ = agent.0.kill();
    let _ = agent.0.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    result.with_context(|| format!("the agent's log:\n{text}"))
}

async fn drive(stack: &Stack, admin: &kube::Client, setup: &Setup, machine: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(admin.clone());
    // Nothing pending: False and [], at once.
    let (condition, annotation) = wait_condition(&nodes, machine, "NoVMEventScheduled").await?;
    ensure!(condition["status"] == "False", "{condition}");
    ensure!(annotation == "[]", "annotation {annotation}");

    // The policy: no other change of its own Node, no write to another Node.
    let own_label = as_agent(
        setup,
        &["label", "node", machine, "nodewright-test/agent=x"],
    )?;
    ensure!(
        !own_label.0
            && own_label
                .1
                .contains("may not change the spec (taints, unschedulable) or the labels"),
        "a label of its own Node is refused: {}",
        own_label.1
    );
    let other = as_agent(
        setup,
        &[
            "annotate",
            "node",
            &setup.other_node,
            &format!("{EVENTS_ANNOTATION}=[]"),
        ],
    )?;
    ensure!(
        !other.0 && other.1.contains("may write only the Node its pod runs on"),
        "another Node is refused: {}",
        other.1
    );

    // A Redeploy, and a type nodewright does not know.
    let sandbox = Sandbox::new(stack)?;
    let redeploy = sandbox.schedule_event("Redeploy", machine, 120).await?;
    let unknown = sandbox
        .schedule_event("SpotRebalanceRecommendation", machine, 600)
        .await?;
    let (condition, annotation) = wait_condition(&nodes, machine, "Redeploy").await?;
    let message = condition["message"].as_str().unwrap_or_default();
    ensure!(
        condition["status"] == "True"
            && message.contains(&format!("EventId: {redeploy}."))
            && message.contains(&format!("EventId: {unknown}.")),
        "{condition}"
    );
    let listed: Vec<Value> = serde_json::from_str(&annotation)?;
    let ids: Vec<&str> = listed
        .iter()
        .filter_map(|e| e["EventId"].as_str())
        .collect();
    ensure!(
        ids == [redeploy.as_str(), unknown.as_str()],
        "annotation {annotation}"
    );
    ensure!(
        listed[1]["EventType"] == "SpotRebalanceRecommendation",
        "{annotation}"
    );

    let reasons = ["RedeployScheduled", "SpotRebalanceRecommendationScheduled"];
    eventually(
        "an Event for each",
        WAIT,
        Duration::from_millis(500),
        || async {
            let found = node_events(admin, machine).await?;
            Ok(reasons
                .iter()
                .all(|reason| found.iter().any(|e| e.reason.as_deref() == Some(*reason)))
                .then_some(()))
        },
    )
    .await?;
    // A few polls later, still one each.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let found = node_events(admin, machine).await?;
    for reason in reasons {
        let matching: Vec<&Event> = found
            .iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect();
        ensure!(
            matching.len() == 1,
            "one Event {reason}: {}",
            matching.len()
        );
        let event = matching[0];
        ensure!(
            event.type_.as_deref() == Some("Warning")
                && event.reporting_controller.as_deref() == Some("nodewright.io/node-agent")
                && event.reporting_instance.as_deref() == Some(machine)
                && event.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Node"),
            "the Event {reason} as sent: {:?}",
            event
        );
    }
    let redeploy_event = found
        .iter()
        .find(|e| e.reason.as_deref() == Some("RedeployScheduled"))
        .context("RedeployScheduled")?;
    ensure!(
        redeploy_event
            .note
            .as_deref()
            .is_some_and(|note| note.contains(&format!("EventId: {redeploy}."))),
        "the note names the event: {:?}",
        redeploy_event.note
    );

    // Nothing asked for: nothing acknowledged.
    ensure!(
        sandbox.scheduled_event(&redeploy).await?["status"] == "Scheduled",
        "the Redeploy waits for its acknowledgement"
    );
    // Asked for: acknowledged by this VM's service.
    nodes
        .patch(
            machine,
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "annotations": { ACK_ANNOTATION: redeploy } } })),
        )
        .await?;
    let history = eventually(
        "the Redeploy acknowledged",
        WAIT,
        Duration::from_millis(500),
        || async {
            let event = sandbox.scheduled_event(&redeploy).await?;
            Ok((event["history"]["startedBy"] == "acknowledged").then_some(event))
        },
    )
    .await?;
    ensure!(
        history["history"]["acknowledgedBy"]
            .as_str()
            .is_some_and(|vm| vm.eq_ignore_ascii_case(machine)),
        "acknowledged by {machine}'s service: {history}"
    );
    ensure!(
        sandbox.scheduled_event(&unknown).await?["status"] == "Scheduled",
        "the event nobody asked for is not acknowledged"
    );
    sandbox.cancel_scheduled_event(&unknown).await?;
    eventually(
        "the Redeploy to end",
        Duration::from_secs(180),
        Duration::from_secs(1),
        || async {
            let event = sandbox.scheduled_event(&redeploy).await?;
            Ok((event["status"] == "Ended").then_some(()))
        },
    )
    .await?;
    let (condition, annotation) = wait_condition(&nodes, machine, "NoVMEventScheduled").await?;
    ensure!(
        condition["status"] == "False" && annotation == "[]",
        "{condition} {annotation}"
    );
    Ok(())
}

/// Waits until the Node's condition has `reason`; the condition (as JSON) and the annotation.
async fn wait_condition(nodes: &Api<Node>, machine: &str, reason: &str) -> Result<(Value, String)> {
    eventually(
        &format!("{CONDITION} with reason {reason} on Node {machine}"),
        WAIT,
        Duration::from_millis(500),
        || async {
            let node = nodes.get(machine).await?;
            let condition = node
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == CONDITION);
            let annotation = node
                .metadata
                .annotations
                .unwrap_or_default()
                .get(EVENTS_ANNOTATION)
                .cloned();
            Ok(match (condition, annotation) {
                (Some(condition), Some(annotation))
                    if condition.reason.as_deref() == Some(reason) =>
                {
                    ensure!(
                        condition.last_heartbeat_time.is_some()
                            && condition.last_transition_time.is_some(),
                        "the condition's times: {condition:?}"
                    );
                    Some((serde_json::to_value(condition)?, annotation))
                }
                _ => None,
            })
        },
    )
    .await
}

/// The events.k8s.io Events regarding Node `machine`.
async fn node_events(admin: &kube::Client, machine: &str) -> Result<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(admin.clone(), "default");
    let selector = format!("regarding.kind=Node,regarding.name={machine}");
    Ok(events
        .list(&ListParams::default().fields(&selector))
        .await?
        .items
        .into_iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("nodewright.io/node-agent"))
        .collect())
}

/// Starts the agent for `machine` with `kubeconfig`, its output in `log`.
fn start_agent(stack: &Stack, kubeconfig: &Path, machine: &str, log: &Path) -> Result<KillOnDrop> {
    let file = std::fs::File::create(log)?;
    let child = Command::new(binary("nodewright-node-agent")?)
        .args(["--node-name", machine, "--imds-url-from-provider-id"])
        .args([
            "--imds-url",
            &stack.arm.endpoint,
            "--poll-interval",
            "500ms",
        ])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("RUST_LOG", "info")
        .env_remove("KUBECONFIG")
        .stdout(Stdio::from(file.try_clone()?))
        .stderr(Stdio::from(file))
        .spawn()?;
    Ok(KillOnDrop(child))
}

/// kubectl with the agent's token: whether it succeeded, and its stderr.
fn as_agent(setup: &Setup, args: &[&str]) -> Result<(bool, String)> {
    let output = Command::new(nodewright_tests::stack::kubectl()?)
        .arg("--kubeconfig")
        .arg(&setup.kubeconfig)
        .args(args)
        .output()?;
    Ok((
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

/// This run's copies of the agent's RBAC and admission policy, its pod and another Node.
struct Setup {
    namespace: String,
    role: String,
    other_node: String,
    kubeconfig: PathBuf,
}

impl Setup {
    /// Creates the ServiceAccount (in a fresh namespace), the ClusterRole and binding and the
    /// policy and binding of `deploy/node-agent.yaml`, renamed; a pod of the ServiceAccount on
    /// `machine`'s Node; another Node; and a kubeconfig with a token bound to the pod.
    async fn install(&self, stack: &Stack, admin: &kube::Client, machine: &str) -> Result<()> {
        let source = Source::Manifests;
        if let Some(dir) = self.kubeconfig.parent() {
            std::fs::create_dir_all(dir)?;
        }
        create_namespace(admin, &self.namespace).await?;
        let mut account: ServiceAccount = source.object("ServiceAccount", NAME)?;
        account.metadata.namespace = Some(self.namespace.clone());
        Api::<ServiceAccount>::namespaced(admin.clone(), &self.namespace)
            .create(&PostParams::default(), &account)
            .await
            .context("creating the ServiceAccount")?;
        let mut role: ClusterRole = source.object("ClusterRole", NAME)?;
        role.metadata.name = Some(self.role.clone());
        Api::<ClusterRole>::all(admin.clone())
            .create(&PostParams::default(), &role)
            .await
            .context("creating the ClusterRole")?;
        let mut binding: ClusterRoleBinding = source.object("ClusterRoleBinding", NAME)?;
        binding.metadata.name = Some(self.role.clone());
        binding.role_ref.name = self.role.clone();
        for subject in binding.subjects.iter_mut().flatten() {
            subject.namespace = Some(self.namespace.clone());
        }
        Api::<ClusterRoleBinding>::all(admin.clone())
            .create(&PostParams::default(), &binding)
            .await
            .context("creating the ClusterRoleBinding")?;
        self.install_policy(stack)?;

        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": { "name": self.other_node, "annotations": { KWOK_ANNOTATION: "fake" } },
        }))?;
        Api::<Node>::all(admin.clone())
            .create(&PostParams::default(), &node)
            .await
            .context("creating the other Node")?;
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "node-agent" },
            "spec": {
                "nodeName": machine, "serviceAccountName": NAME,
                "tolerations": [{ "operator": "Exists" }],
                "containers": [{ "name": "node-agent", "image": "pause" }],
            },
        }))?;
        let pod = Api::<Pod>::namespaced(admin.clone(), &self.namespace)
            .create(&PostParams::default(), &pod)
            .await
            .context("creating the agent's pod")?;
        let uid = pod.metadata.uid.context("the pod's uid")?;
        let token = kubectl(
            stack,
            &[
                "create",
                "token",
                NAME,
                "--namespace",
                &self.namespace,
                "--bound-object-kind",
                "Pod",
                "--bound-object-name",
                "node-agent",
                "--bound-object-uid",
                &uid,
                "--duration",
                "1h",
            ],
        )?;
        write_kubeconfig(stack, &self.kubeconfig, NAME, token.trim())?;
        let who = Command::new(nodewright_tests::stack::kubectl()?)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["auth", "whoami", "--output", "json"])
            .output()?;
        let who: Value = serde_json::from_slice(&who.stdout).with_context(|| {
            format!(
                "kubectl auth whoami: {}",
                String::from_utf8_lossy(&who.stderr)
            )
        })?;
        ensure!(
            who["status"]["userInfo"]["extra"]["authentication.kubernetes.io/node-name"]
                == json!([machine]),
            "the pod's token names its Node: {who}"
        );
        // The policy takes effect once compiled: wait until it refuses a label change.
        eventually(
            "the policy to refuse a label change",
            WAIT,
            Duration::from_millis(500),
            || async {
                let (done, _) = as_agent(
                    self,
                    &[
                        "label",
                        "node",
                        machine,
                        "nodewright-test/probe=x",
                        "--dry-run=server",
                    ],
                )?;
                Ok((!done).then_some(()))
            },
        )
        .await?;
        Ok(())
    }

    /// Applies the policy and binding of `deploy/node-agent.yaml`, renamed and matching only
    /// this run's ServiceAccount; fails on a type-checking warning.
    fn install_policy(&self, stack: &Stack) -> Result<()> {
        let shipped = "'system:serviceaccount:nodewright:nodewright-node-agent'";
        let mine = format!("'system:serviceaccount:{}:{NAME}'", self.namespace);
        let mut items = Vec::new();
        for object in Source::Manifests.objects()? {
            let kind = object["kind"].as_str().unwrap_or_default().to_owned();
            if object["metadata"]["name"] != NAME
                || ![
                    "ValidatingAdmissionPolicy",
                    "ValidatingAdmissionPolicyBinding",
                ]
                .contains(&kind.as_str())
            {
                continue;
            }
            let mut object = object.clone();
            object["metadata"]["name"] = json!(self.role);
            if kind == "ValidatingAdmissionPolicy" {
                let expression = object["spec"]["matchConditions"][0]["expression"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                ensure!(
                    expression.contains(shipped),
                    "the policy matches {shipped}: {expression}"
                );
                object["spec"]["matchConditions"][0]["expression"] =
                    json!(expression.replace(shipped, &mine));
            } else {
                object["spec"]["policyName"] = json!(self.role);
            }
            items.push(object);
        }
        ensure!(
            items.len() == 2,
            "deploy/node-agent.yaml has the policy and its binding"
        );
        let file = self.kubeconfig.with_extension("policy.json");
        std::fs::write(
            &file,
            serde_json::to_string(&json!({ "apiVersion": "v1", "kind": "List", "items": items }))?,
        )?;
        kubectl(stack, &["apply", "--filename", &file.to_string_lossy()])?;
        Ok(())
    }

    /// Removes everything `install` made; reports problems without failing.
    async fn remove(&self, stack: &Stack, admin: &kube::Client) {
        for kind in [
            "validatingadmissionpolicybinding",
            "validatingadmissionpolicy",
        ] {
            if let Err(error) = kubectl(stack, &["delete", kind, &self.role, "--ignore-not-found"])
            {
                eprintln!("removing {kind} {}: {error:#}", self.role);
            }
        }
        let _ = Api::<Pod>::namespaced(admin.clone(), &self.namespace)
            .delete("node-agent", &DeleteParams::default().grace_period(0))
            .await;
        let _ = Api::<Node>::all(admin.clone())
            .delete(&self.other_node, &DeleteParams::default())
            .await;
        let _ = Api::<ClusterRoleBinding>::all(admin.clone())
            .delete(&self.role, &DeleteParams::default())
            .await;
        let _ = Api::<ClusterRole>::all(admin.clone())
            .delete(&self.role, &DeleteParams::default())
            .await;
        let _ = Api::<Namespace>::all(admin.clone())
            .delete(&self.namespace, &DeleteParams::default())
            .await;
        for extension in ["kubeconfig", "policy.json"] {
            let _ = std::fs::remove_file(self.kubeconfig.with_extension(extension));
        }
    }
}
