//! The node joiner: registers a Node for every booted emulated VM, as its kubelet would, and stops
//! the Node's heartbeat when the VM is deleted or not running.
//!
//! # Expected Flow
//!
//! 1. A VM becomes [`GuestState::Running`](crate::compute::GuestState::Running) (and joins the
//!    cluster): the joiner creates a Node named after the lower-cased computer name, with
//!    `spec.providerID = azure://<VM id>` (casing kept), kubelet's well-known labels, the labels
//!    and taints the VM was given (below), and the annotations `kwok.x-k8s.io/node: fake`,
//!    `volumes.kubernetes.io/controller-managed-attach-detach: "true"` and
//!    `node.alpha.kubernetes.io/ttl: "0"`.
//! 2. It writes `status` (capacity and allocatable from the VM size, addresses, node info)
//!    through the status subresource, since `create` ignores status. kwok's node-initialize stage
//!    sets the conditions (Ready) and kwok renews the Node's lease in `kube-node-lease`, as a
//!    kubelet's heartbeat would.
//! 3. When the VM is deleted, stopped, deallocated or failed, the joiner stops the heartbeat: it
//!    takes the Node's lease over (holder [`STOPPED_LEASE_HOLDER`], a lease duration of decades,
//!    renew time unchanged) and marks the Node with [`HEARTBEAT_STOPPED_ANNOTATION`]. kwok does not
//!    renew a lease another holder holds and stops updating the Node, so the node-lifecycle
//!    controller marks it NotReady (Unknown) and taints it after its grace period. The Node
//!    stays, as in Azure.
//! 4. When the VM runs again, the joiner rewrites the status, clears the lease holder (kwok takes
//!    the lease back at its next lease sync, within about 10 s, and initializes the Node again)
//!    and removes the annotation.
//!
//! Removing the kwok annotation would not stop a heartbeat: kwok v0.8 keeps renewing the lease of
//! a Node it took up until the Node is deleted, and never takes up a Node that gains the
//! annotation by an update. Hence the lease hand-over.
//!
//! # Labels and taints given to a VM
//!
//! - **Custom data** (`osProfile.customData`, decoded): every `--node-labels=k=v,...` and
//!   `--register-with-taints=k=v:Effect,...` in it, as a bootstrap script passes them to kubelet
//!   (`--flag=value` or `--flag value`, quoted or not; later flags win).
//! - **Tags**: a tag named `k8s-node-label.<key>` gives the label `<key>` its value, with every
//!   `:` in `<key>` read as `/`, because Azure tag names may not contain `/` and label keys never
//!   contain `:`. Example: tag `k8s-node-label.nodewright.io:pool = web` gives label
//!   `nodewright.io/pool=web`.
//!
//! Custom-data labels win over tag labels; kubelet's well-known labels (hostname, OS,
//! architecture, instance type, region, zone) win over both.
//!
//! # Bootstrap tokens
//!
//! A kubelet joins with the credential its bootstrap gives it, and an apiserver that does not
//! accept it never sees the Node. When the joiner is started with
//! [`run_with_token_check`] (the sandbox binary is) and a VM's custom data passes a bootstrap
//! token to `kubeadm join` (`--token <id>.<secret>`), the joiner first authenticates with it:
//! `POST /apis/authentication.k8s.io/v1/selfsubjectreviews` with `Authorization: Bearer <token>`
//! (the apiserver runs with `--enable-bootstrap-token-auth`), and registers the Node only when the
//! apiserver answers that the caller is `system:bootstrap:<id>`. A token it refuses (unknown
//! secret, expired, deleted, not for authentication) keeps the VM from joining; the joiner logs
//! why once per VM and reason, naming the token's Secret, never the token, and tries again on
//! every pass, as a kubelet retries.
//!
//! A token whose id has no Secret `kube-system/bootstrap-token-<id>` at all is one the cluster's
//! token store does not hold (a static marker, as the e2e tests put into bootstraps they scan
//! for): the sandbox cannot tell it from a credential of another kind and joins the VM as before.
//!
//! # Guarantees
//!
//! - A Node is never deleted, and a Node whose `spec.providerID` does not start with
//!   [`JoinerSettings::managed_provider_id_prefix`] is never modified.
//! - A Node whose name is taken by a Node with another providerID is left alone.
//! - Every step is idempotent; a pass that fails half-way is completed by the next one.
//!
//! # Caveats
//!
//! - A Node that exists without the kwok annotation (created by someone else with this VM's
//!   providerID) gets the annotation, but kwok v0.8 only takes it up when it next re-lists Nodes
//!   (a watch restart or a kwok restart).
//! - kwok may initialize a new Node before its status is written; for a moment it then shows
//!   kwok's default capacity.

mod decide;
mod error;
mod spec;
mod tokens;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

pub use decide::{NodeAction, ObservedNode, decide_nodes};
pub use error::{Error, Result};
pub use spec::{
    ATTACH_DETACH_ANNOTATION, Capacity, HEARTBEAT_STOPPED_ANNOTATION, KWOK_ANNOTATION,
    KWOK_ANNOTATION_VALUE, KubeletFlags, KubeletInfo, STOPPED_LEASE_HOLDER, TAG_LABEL_PREFIX,
    bootstrap_token, capacity_of, node_for_machine, node_name, node_status, parse_kubelet_flags,
    provider_id,
};
pub use tokens::TokenVerdict;

use crate::compute::{Compute, MachineView};

/// How the node joiner behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinerSettings {
    /// How often to re-check every VM and Node even without a change notification. Default 1 s.
    pub resync: Duration,
    /// `status.nodeInfo.kubeletVersion` of the registered Nodes. Default `v1.36.3`.
    pub kubelet_version: String,
    /// Only Nodes whose `spec.providerID` starts with this (case-insensitively) have their
    /// heartbeat stopped when no booted VM matches them. Default `azure:///subscriptions/`; set
    /// `azure:///subscriptions/<subscription>/` when other sandboxes share the cluster.
    pub managed_provider_id_prefix: String,
    /// How many Nodes one pass changes at the same time. Default 8.
    pub concurrency: usize,
}

impl Default for JoinerSettings {
    fn default() -> Self {
        Self {
            resync: Duration::from_secs(1),
            kubelet_version: "v1.36.3".to_owned(),
            managed_provider_id_prefix: "azure:///subscriptions/".to_owned(),
            concurrency: 8,
        }
    }
}

/// Runs the node joiner until the returned future is dropped.
///
/// It passes over every VM and Node whenever the emulator reports a change, and at least once per
/// [`JoinerSettings::resync`] once the first list of Nodes has arrived. Failed steps are logged and
/// retried on the next pass.
///
/// Bootstrap tokens in custom data are not checked: see [`run_with_token_check`].
pub fn run<C: Compute>(
    client: kube::Client,
    compute: Arc<C>,
    settings: JoinerSettings,
) -> impl Future<Output = ()> + Send + 'static {
    let joiner = NodeJoiner {
        nodes: Api::all(client.clone()),
        leases: Api::namespaced(client, NODE_LEASE_NAMESPACE),
        compute,
        settings,
        tokens: None,
    };
    joiner.run()
}

/// Like [`run`], and a VM whose custom data passes a bootstrap token joins only when the
/// apiserver of `config` (the joiner's own, with the token instead of its credentials)
/// authenticates the token (see the module doc, "Bootstrap tokens").
pub fn run_with_token_check<C: Compute>(
    client: kube::Client,
    config: kube::Config,
    compute: Arc<C>,
    settings: JoinerSettings,
) -> impl Future<Output = ()> + Send + 'static {
    let joiner = NodeJoiner {
        nodes: Api::all(client.clone()),
        leases: Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE),
        compute,
        settings,
        tokens: Some(tokens::TokenCheck::new(client, config)),
    };
    joiner.run()
}

/// The namespace of the Nodes' heartbeat leases.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The lease duration that keeps kwok from taking a stopped Node's lease back (about 31 years).
const STOPPED_LEASE_SECONDS: i32 = 1_000_000_000;

/// The node joiner's state: the Node and Lease APIs, the emulator and the settings.
struct NodeJoiner<C> {
    nodes: Api<Node>,
    leases: Api<Lease>,
    compute: Arc<C>,
    settings: JoinerSettings,
    /// Checks the bootstrap tokens VMs join with; `None`: joins without checking.
    tokens: Option<tokens::TokenCheck>,
}

impl<C: Compute> NodeJoiner<C> {
    async fn run(self) {
        let (reader, writer) = reflector::store();
        let mut node_events = pin!(
            watcher(self.nodes.clone(), watcher::Config::default())
                .default_backoff()
                .reflect(writer)
        );
        let mut changes = self.compute.changes();
        let mut changes_open = true;
        let mut resync = tokio::time::interval(self.settings.resync);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut synced = false;
        tracing::info!("node joiner started");
        loop {
            tokio::select! {
                event = node_events.next() => match event {
                    Some(Ok(watcher::Event::InitDone)) => synced = true,
                    Some(Ok(_)) => continue,
                    Some(Err(error)) => {
                        tracing::warn!(error = %error, "watching nodes");
                        continue;
                    }
                    None => {
                        tracing::error!("the node watch ended; the node joiner stops");
                        return;
                    }
                },
                changed = changes.changed(), if changes_open => {
                    changes_open = changed.is_ok();
                }
                _ = resync.tick() => {}
            }
            if synced {
                self.pass(&reader).await;
            }
        }
    }

    /// Decides on the current VMs and Nodes and carries the actions out.
    async fn pass(&self, reader: &Store<Node>) {
        let observed: Vec<ObservedNode> = reader
            .state()
            .iter()
            .map(|node| ObservedNode::from_node(node))
            .collect();
        // Only booted VMs get or keep a heartbeating Node: the others need no view.
        let machines = self.compute.running_machines();
        let actions = decide_nodes(
            &machines,
            &observed,
            &self.settings.managed_provider_id_prefix,
        );
        futures::stream::iter(actions)
            .for_each_concurrent(self.settings.concurrency.max(1), |action| async move {
                if let Err(error) = self.apply(action).await {
                    tracing::warn!(error = %error_chain(&error), "node joiner step failed; retrying");
                }
            })
            .await;
    }

    async fn apply(&self, action: NodeAction) -> Result<()> {
        match action {
            NodeAction::Register(machine) => self.register(&machine).await,
            NodeAction::Restore(machine) => {
                let node = node_name(&machine);
                self.write_status(&machine).await?;
                self.release_lease(&node).await?;
                self.annotate(&node, Some(KWOK_ANNOTATION_VALUE), None)
                    .await?;
                tracing::info!(%node, vm = %machine.id, "node heartbeat restored");
                Ok(())
            }
            NodeAction::StopHeartbeat { node } => {
                self.take_lease(&node).await?;
                self.annotate(&node, Some(KWOK_ANNOTATION_VALUE), Some("true"))
                    .await?;
                tracing::info!(%node, "node heartbeat stopped");
                Ok(())
            }
            NodeAction::NameTaken { node, provider_id } => {
                tracing::debug!(
                    %node,
                    ?provider_id,
                    "a node of this name with another providerID exists; not registering"
                );
                Ok(())
            }
        }
    }

    /// Creates the Node and writes its status. kwok may initialize the Node in between, with
    /// default capacity the status write then replaces.
    async fn register(&self, machine: &MachineView) -> Result<()> {
        let name = node_name(machine);
        if let Some(check) = &self.tokens
            && let Some(token) = machine.custom_data.as_deref().and_then(bootstrap_token)
            && !check.admits(machine, &name, token).await?
        {
            return Ok(());
        }
        let node = node_for_machine(machine, &self.kubelet_info());
        match self.nodes.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {
                // Registered by an earlier pass the Node cache has not caught up with yet.
                tracing::debug!(node = %name, "node already exists");
                return Ok(());
            }
            Err(source) => return Err(Error::CreateNode { node: name, source }),
        }
        self.write_status(machine).await?;
        tracing::info!(node = %name, vm = %machine.id, "node registered");
        Ok(())
    }

    async fn write_status(&self, machine: &MachineView) -> Result<()> {
        let name = node_name(machine);
        let patch = json!({ "status": node_status(machine, &self.kubelet_info()) });
        self.nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| Error::WriteNodeStatus {
                node: name.clone(),
                source,
            })?;
        Ok(())
    }

    /// Sets the kwok annotation and sets or removes the heartbeat-stopped annotation.
    async fn annotate(&self, node: &str, kwok: Option<&str>, stopped: Option<&str>) -> Result<()> {
        let patch = json!({ "metadata": { "annotations": {
            KWOK_ANNOTATION: kwok,
            HEARTBEAT_STOPPED_ANNOTATION: stopped,
        } } });
        self.nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| Error::PatchNodeAnnotations {
                node: node.to_owned(),
                source,
            })?;
        Ok(())
    }

    /// Takes the Node's lease from kwok without renewing it, creating it if kwok has not yet.
    async fn take_lease(&self, node: &str) -> Result<()> {
        let patch = json!({ "spec": {
            "holderIdentity": STOPPED_LEASE_HOLDER,
            "leaseDurationSeconds": STOPPED_LEASE_SECONDS,
        } });
        let patched = self
            .leases
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        let result = match patched {
            Err(kube::Error::Api(status)) if status.code == 404 => {
                let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
                let lease: Lease = serde_json::from_value(json!({
                    "metadata": { "name": node, "namespace": NODE_LEASE_NAMESPACE },
                    "spec": {
                        "holderIdentity": STOPPED_LEASE_HOLDER,
                        "leaseDurationSeconds": STOPPED_LEASE_SECONDS,
                        "renewTime": now,
                    },
                }))
                .map_err(|error| Error::UpdateLease {
                    node: node.to_owned(),
                    source: kube::Error::SerdeError(error),
                })?;
                self.leases
                    .create(&PostParams::default(), &lease)
                    .await
                    .map(drop)
            }
            other => other.map(drop),
        };
        result.map_err(|source| Error::UpdateLease {
            node: node.to_owned(),
            source,
        })
    }

    /// Clears the lease holder when the joiner holds the lease, so kwok acquires it at its next
    /// sync and heartbeats again.
    async fn release_lease(&self, node: &str) -> Result<()> {
        let lease_error = |source| Error::UpdateLease {
            node: node.to_owned(),
            source,
        };
        let lease = self.leases.get_opt(node).await.map_err(lease_error)?;
        let held_by_joiner = lease
            .and_then(|lease| lease.spec)
            .and_then(|spec| spec.holder_identity)
            .is_some_and(|holder| holder == STOPPED_LEASE_HOLDER);
        if !held_by_joiner {
            return Ok(());
        }
        let patch = json!({ "spec": { "holderIdentity": null } });
        match self
            .leases
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(source) => Err(lease_error(source)),
        }
    }

    fn kubelet_info(&self) -> KubeletInfo {
        KubeletInfo {
            kubelet_version: self.settings.kubelet_version.clone(),
        }
    }
}

/// An error and its sources, separated by `: `.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
