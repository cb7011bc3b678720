//! Kubernetes activities, over `kube` and `k8s-openapi`.

pub mod bootstrap;
pub mod cache;
mod cordon_mark;
pub mod disruption;
pub mod drain;
mod error;
pub mod events;
pub mod follow;
pub mod identity;
mod inspect;
pub mod join_token;
mod node_lease;
mod node_spec;
pub mod node_story;
pub mod node_watch;
pub mod nodes;
pub mod pool;
mod request_meter;
pub mod restamp;
pub mod revisions;
pub mod sweep;
pub mod uncordon;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nodewright_model::identity::ExpectedIdentity;
use nodewright_model::listing::{Listing, Since};
use nodewright_model::preflight::KubernetesReport;
use nodewright_model::rollout::PoolNode;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

use crate::lifetime;
use crate::metrics::EvictionResult;

pub use disruption::{DisruptionMarksOf, NodeMarks};
pub use drain::{
    AwaitPodsGone, AwaitVolumes, Eviction, ListNodePods, NodeAttachments, NodePods, Pending,
    PodAction, PodDeletion, PrepareDrain, PreparedNode, Reattached, RestoreNode,
};
pub use error::{Error, Result};
pub use events::{EventRecorded, NodeEvent, PoolEvent};
pub use join_token::{DeleteBootstrapToken, JoinTokens, TokenDeleted};
pub use node_watch::WatchPoolNodes;
pub use nodes::{AwaitNode, MachineNode, NodeChange, NodeMetadata, NodeTaint, NodeWait};
pub use pool::{ListPoolNodes, MarkOutdated, MarkedOutdated};
pub use restamp::{DrainRestamped, RestampDrain};
pub use revisions::{ReadRevisions, RecordRevision, RevisionRecorded};
pub use sweep::{ApiHealth, DeleteOrphanNode, ListNodesPage, NodesPage, OrphanNodeDeleted};

use std::result::Result as StdResult;

/// The Kubernetes activities. Holds the client, and the cluster identity the API must carry.
pub struct KubeActivities {
    client: ::kube::Client,
    identity: Option<ExpectedIdentity>,
    /// Whether this worker has verified (or recorded) the identity since it started.
    established: Arc<AtomicBool>,
    /// The pool listings sent lately, for answers "since" one of them.
    node_listings: crate::listing_cache::ListingCache<PoolNode>,
    /// The states the Node watches ended with, for the next look to start from.
    node_watches: node_watch::WatchMemory,
    /// The pods, Nodes, Namespaces and budgets the drains read, one watch per kind.
    cache: cache::ClusterCache,
    /// The Events told about Nodes, counted as series.
    story: node_story::NodeStory,
}

/// Builds the Kubernetes client nodewright uses from `config`, with kube's own retries off.
///
/// kube retries 429, 503 and 504 answers by default with backoff. For nodewright that is wrong
/// twice: a 429 on an eviction means a PodDisruptionBudget blocks it and must be seen at once, and
/// retries belong to Temporal, which records them in the run's history.
pub fn client_from_config(mut config: ::kube::Config) -> StdResult<::kube::Client, ::kube::Error> {
    crate::tls::install_crypto_provider();
    config.default_retry = false;
    Ok(::kube::client::ClientBuilder::try_from(config)?
        .with_layer(&request_meter::RequestMeterLayer)
        .build())
}

impl KubeActivities {
    /// Activities that act on the cluster behind `client` (build it with [`client_from_config`]),
    /// without checking the API's cluster identity (in-test workers).
    pub fn new(client: ::kube::Client) -> Self {
        Self {
            client,
            identity: None,
            established: Arc::default(),
            node_listings: crate::listing_cache::ListingCache::default(),
            node_watches: node_watch::WatchMemory::default(),
            cache: cache::ClusterCache::default(),
            story: node_story::NodeStory::default(),
        }
    }

    /// Like [`Self::new`], and `kube.api_health` also verifies that the API carries `identity`
    /// (an orphan sweep freezes otherwise). `established` says whether the worker has verified or
    /// recorded it since it started; until then (its API did not answer at start) the first
    /// check records an absent identity, as the start would have. The worker uses this.
    pub fn with_identity(
        client: ::kube::Client,
        identity: ExpectedIdentity,
        established: Arc<AtomicBool>,
    ) -> Self {
        Self {
            client,
            identity: Some(identity),
            established,
            node_listings: crate::listing_cache::ListingCache::default(),
            node_watches: node_watch::WatchMemory::default(),
            cache: cache::ClusterCache::default(),
            story: node_story::NodeStory::default(),
        }
    }

    /// The namespace of the identity ConfigMap, where the pools' revisions live too.
    fn identity_namespace(&self) -> &str {
        self.identity.as_ref().map_or(
            nodewright_model::identity::DEFAULT_IDENTITY_NAMESPACE,
            |identity| identity.namespace.as_str(),
        )
    }
}

#[activities]
impl KubeActivities {
    /// Reads a pool's revisions: the ConfigMap `nodewright-revisions-<pool>` in the identity
    /// namespace, as found (absent, someone else's, or its data; the caller parses it).
    ///
    /// # Idempotency
    /// Read-only: a rerun reads again.
    #[activity(name = "kube.read_revisions")]
    pub async fn read_revisions(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ReadRevisions,
    ) -> Result<nodewright_model::rollout::PoolRevisions, ActivityError> {
        revisions::read(&self.client, self.identity_namespace(), &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Records a rollout's start or end in its pool's revisions (creating the ConfigMap, labelled
    /// as nodewright's, when absent; never writing one that is not nodewright's).
    ///
    /// # Idempotency
    /// The change is applied to what is read: a rerun of a start writes the same entry (its
    /// number stays, as the template's entry is the current one), a rerun of an end writes the
    /// same outcome and time (a completed rollback's number stays once it is the current one).
    #[activity(name = "kube.record_revision")]
    pub async fn record_revision(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: RecordRevision,
    ) -> Result<RevisionRecorded, ActivityError> {
        revisions::record(&self.client, self.identity_namespace(), &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Reads the apiserver's version and counts the nodes and the Ready ones.
    ///
    /// # Idempotency
    /// Read-only: a rerun reads again.
    #[activity(name = "inspect_kubernetes")]
    pub async fn inspect_kubernetes(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _input: (),
    ) -> Result<KubernetesReport, ActivityError> {
        inspect::inspect_cluster(&self.client)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Waits until the machine's Node registers with the VM's providerID, or the deadline: the
    /// Node followed through a watch (`kube::follow`), read every 30 s besides.
    ///
    /// # Idempotency
    /// Read-only; a rerun waits again.
    #[activity(name = "kube.await_node_registered")]
    pub async fn await_node_registered(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AwaitNode,
    ) -> Result<NodeWait, ActivityError> {
        lifetime::until_cancelled(&ctx, async {
            nodes::await_node(&self.client, &ctx, &input, false)
                .await
                .map_err(Error::into_activity_error)
        })
        .await
    }

    /// Waits until the machine's Node is Ready, or the deadline (followed as
    /// [`Self::await_node_registered`] follows it).
    ///
    /// # Idempotency
    /// Read-only; a rerun waits again.
    #[activity(name = "kube.await_node_ready")]
    pub async fn await_node_ready(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AwaitNode,
    ) -> Result<NodeWait, ActivityError> {
        let waited = lifetime::until_cancelled(&ctx, async {
            nodes::await_node(&self.client, &ctx, &input, true)
                .await
                .map_err(Error::into_activity_error)
        })
        .await;
        if let Ok(NodeWait::Reached { .. }) = &waited {
            let note = format!(
                "the machine's VM joined the cluster and its Node is Ready ({})",
                input.vm_id
            );
            self.tell(&input.node, "Joined", "Create", "", note, false)
                .await;
        }
        waited
    }

    /// Tells what happened to `node` as an Event (see [`node_story`]).
    async fn tell(
        &self,
        node: &str,
        reason: &str,
        action: &str,
        subject: &str,
        note: String,
        warning: bool,
    ) {
        let occurrence = node_story::Occurrence {
            node,
            reason,
            action,
            subject,
            note,
            warning,
        };
        self.story.tell(&self.client, occurrence).await;
    }

    /// Tells an eviction's answer about the Node the pod is drained from.
    async fn tell_eviction(&self, node: &str, pod: &str, eviction: &Eviction) {
        match eviction {
            Eviction::Accepted => {
                let note = format!("pod {pod} evicted for a drain");
                self.tell(node, "Evicted", "Drain", pod, note, false).await;
            }
            Eviction::Blocked { pdb, message } => {
                let budget = pdb
                    .as_ref()
                    .map(|pdb| format!("PodDisruptionBudget {}", pdb.key()))
                    .unwrap_or_else(|| "a PodDisruptionBudget".to_owned());
                let subject = format!("{pod} {budget}");
                let note = format!("eviction of pod {pod} refused by {budget}: {message}");
                self.tell(node, "EvictionBlocked", "Drain", &subject, note, true)
                    .await;
            }
            Eviction::Refused { code, message, .. } => {
                let subject = format!("{pod} {code}");
                let note = format!("eviction of pod {pod} refused ({code}): {message}");
                self.tell(node, "EvictionRefused", "Drain", &subject, note, true)
                    .await;
            }
            Eviction::Gone => {}
        }
    }

    /// Applies the pool's and nodewright's labels and annotations to the Node (server-side
    /// apply, field manager `nodewright`) and merges the pool's taints into the Node's, keeping
    /// every taint nodewright did not put there (see [`nodes::apply_metadata`]).
    ///
    /// # Idempotency
    /// An apply of the same fields is a no-op, and so is the taint merge once the Node carries
    /// the template's taints and the `nodewright.io/managed-taints` record of them.
    #[activity(name = "kube.apply_node_metadata")]
    pub async fn apply_node_metadata(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: NodeMetadata,
    ) -> Result<(), ActivityError> {
        nodes::apply_metadata(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Reads the delete hooks on the machine's Node: its annotations
    /// `pre-drain.delete.hook.nodewright.io/<owner>` and
    /// `pre-terminate.delete.hook.nodewright.io/<owner>` (`model::hooks`), at most 32 of each
    /// stage named. No Node, or a Node whose providerID names another VM, has none.
    ///
    /// # Idempotency
    /// Read-only: a rerun reads again.
    #[activity(name = "kube.read_delete_hooks")]
    pub async fn read_delete_hooks(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: MachineNode,
    ) -> Result<nodewright_model::hooks::NodeHooks, ActivityError> {
        nodes::delete_hooks(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Cordons the machine's Node (only when its providerID names the machine's VM).
    ///
    /// # Idempotency
    /// An unschedulable Node is left as it is.
    #[activity(name = "kube.cordon_node")]
    pub async fn cordon_node(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: MachineNode,
    ) -> Result<NodeChange, ActivityError> {
        nodes::cordon(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Prepares the machine's Node for a drain: cordons it, adds the taint
    /// `nodewright.io/draining:NoSchedule` (other taints kept) and, when `terminating`, sets the
    /// condition `Terminating` (reason `ScaleDown`). Only for a Node whose providerID names the
    /// VM and that carries `nodewright.io/machine=<node>`; returns the Node's
    /// `nodewright.io/drain-policy` annotation and its health.
    ///
    /// # Idempotency
    /// A Node already cordoned and tainted is not written again; the condition keeps its
    /// `lastTransitionTime` and only its `lastHeartbeatTime` moves. A Node changed by another
    /// writer meanwhile is read again (409), a few times, then the activity fails retryably.
    #[activity(name = "kube.prepare_drain")]
    pub async fn prepare_drain(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: PrepareDrain,
    ) -> Result<PreparedNode, ActivityError> {
        let prepared = drain::prepare_node(&self.client, &input).await;
        if let Ok(PreparedNode::Prepared { .. }) = &prepared {
            let note = if input.terminating {
                "cordoned and tainted nodewright.io/draining:NoSchedule for a drain; the machine is deleted after it"
            } else {
                "cordoned and tainted nodewright.io/draining:NoSchedule for a drain"
            };
            self.tell(&input.node, "Cordoned", "Drain", "", note.to_owned(), false)
                .await;
        }
        prepared.map_err(Error::into_activity_error)
    }

    /// Lists the pods bound to the Node, with their PersistentVolumeClaims resolved to volume,
    /// CSI driver and handle, and reads the Node's health.
    ///
    /// # Idempotency
    /// Read-only: a rerun reads again.
    #[activity(name = "kube.list_node_pods")]
    pub async fn list_node_pods(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ListNodePods,
    ) -> Result<NodePods, ActivityError> {
        drain::list_node_pods(&self.client, Some(&self.cache), &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Asks for a pod's eviction (`policy/v1`, UID precondition): accepted, gone, or blocked by
    /// a PodDisruptionBudget (429), reported with the budget and the apiserver's message.
    ///
    /// # Idempotency
    /// A rerun after an accepted eviction is accepted again (the pod is terminating) or finds
    /// the pod gone; a pod recreated under the name has another UID and is never hit.
    #[activity(name = "kube.evict_pod")]
    pub async fn evict_pod(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: PodAction,
    ) -> Result<Eviction, ActivityError> {
        let eviction = drain::evict_pod(&self.client, Some(&self.cache), &input).await;
        if let (Some(node), Ok(eviction)) = (input.node.as_deref(), &eviction) {
            self.tell_eviction(node, &input.pod.key(), eviction).await;
        }
        crate::metrics::eviction(match &eviction {
            Ok(Eviction::Accepted) => EvictionResult::Evicted,
            Ok(Eviction::Gone) => EvictionResult::Gone,
            Ok(Eviction::Blocked { .. }) => EvictionResult::BlockedByPdb,
            Ok(Eviction::Refused { code, .. }) if *code == nodewright_model::drain::NO_ANSWER => {
                EvictionResult::Error
            }
            Ok(Eviction::Refused { code, .. }) if *code >= 500 => EvictionResult::Error,
            Ok(Eviction::Refused { .. }) | Err(_) => EvictionResult::Refused,
        });
        eviction.map_err(Error::into_activity_error)
    }

    /// Deletes a pod with grace period 0 and a UID precondition (force mode).
    ///
    /// # Idempotency
    /// A rerun finds the pod gone (404 or another UID) and says so.
    #[activity(name = "kube.delete_pod")]
    pub async fn delete_pod(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: PodAction,
    ) -> Result<PodDeletion, ActivityError> {
        let deleted = drain::delete_pod(&self.client, &input).await;
        if let Ok(PodDeletion::Deleted) = deleted {
            crate::metrics::force_deletion();
            if let Some(node) = input.node.as_deref() {
                let pod = input.pod.key();
                let note =
                    format!("pod {pod} deleted with grace period 0: the drain is in force mode");
                self.tell(node, "ForceDeleted", "Drain", &pod, note, true)
                    .await;
            }
        }
        deleted.map_err(Error::into_activity_error)
    }

    /// Waits, heartbeating, until every pod is absent or has another UID, or the deadline;
    /// returns the pods still there. The Node's pods are followed through a watch
    /// (`kube::follow`); a wait scheduled without the Node reads each pod every second.
    ///
    /// # Idempotency
    /// Read-only; a rerun waits again.
    #[activity(name = "kube.await_pods_gone")]
    pub async fn await_pods_gone(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AwaitPodsGone,
    ) -> Result<Pending, ActivityError> {
        lifetime::until_cancelled(&ctx, async {
            drain::await_pods_gone(&self.client, &ctx, &input)
                .await
                .map_err(Error::into_activity_error)
        })
        .await
    }

    /// Waits, heartbeating each second, until none of the PersistentVolumes has a
    /// VolumeAttachment on the Node (one being deleted still counts), or the deadline; returns
    /// the volumes still attached.
    ///
    /// # Idempotency
    /// Read-only; a rerun waits again.
    #[activity(name = "kube.await_volumes_detached")]
    pub async fn await_volumes_detached(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AwaitVolumes,
    ) -> Result<Pending, ActivityError> {
        let started = std::time::Instant::now();
        let waited = lifetime::until_cancelled(&ctx, async {
            drain::await_volumes_detached(&self.client, &ctx, &input)
                .await
                .map_err(Error::into_activity_error)
        })
        .await;
        if let Ok(pending) = &waited
            && pending.is_done()
            && !input.persistent_volumes.is_empty()
        {
            crate::metrics::volumes_detached(
                &crate::metrics::pool_label(&input.node),
                started.elapsed().as_secs_f64(),
            );
        }
        waited
    }

    /// Waits, heartbeating each second, until each PersistentVolume has an attached
    /// VolumeAttachment on another node, or the deadline; returns where each attached and the
    /// volumes still pending.
    ///
    /// # Idempotency
    /// Read-only; a rerun waits again.
    #[activity(name = "kube.await_volumes_reattached")]
    pub async fn await_volumes_reattached(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: AwaitVolumes,
    ) -> Result<Reattached, ActivityError> {
        let started = std::time::Instant::now();
        let waited = lifetime::until_cancelled(&ctx, async {
            drain::await_volumes_reattached(&self.client, &ctx, &input)
                .await
                .map_err(Error::into_activity_error)
        })
        .await;
        if let Ok(reattached) = &waited {
            for (volume, to) in &reattached.attached {
                let note = format!("PersistentVolume {volume} moved: attached to Node {to}");
                self.tell(&input.node, "VolumeMoved", "Drain", volume, note, false)
                    .await;
            }
        }
        if let Ok(reattached) = &waited
            && !reattached.attached.is_empty()
        {
            crate::metrics::volumes_reattached(
                &crate::metrics::pool_label(&input.node),
                reattached.attached.len(),
                started.elapsed().as_secs_f64(),
            );
        }
        waited
    }

    /// Deletes every VolumeAttachment on the Node (force mode, MCM's `DelVolumesAttachments`),
    /// so the attach/detach controller releases the volumes; returns the names deleted.
    ///
    /// # Idempotency
    /// An attachment already gone is skipped; one still finalizing is deleted again (a no-op
    /// for the apiserver) and named again.
    #[activity(name = "kube.delete_node_volume_attachments")]
    pub async fn delete_node_volume_attachments(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: NodeAttachments,
    ) -> Result<Vec<String>, ActivityError> {
        drain::delete_node_volume_attachments(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Undoes a drain's preparation when the drain is cancelled: removes the draining taint
    /// (other taints kept) and the `Terminating` condition, and clears `spec.unschedulable`
    /// unless `keep_cordoned`. Only for a Node of the machine, as `kube.prepare_drain`.
    ///
    /// # Idempotency
    /// A Node with none of these is left as it is.
    #[activity(name = "kube.restore_node")]
    pub async fn restore_node(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: drain::RestoreNode,
    ) -> Result<NodeChange, ActivityError> {
        drain::restore_node(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Makes the machine's Node schedulable again: clears `spec.unschedulable`, removes the
    /// draining taint (other taints kept) and the `Terminating` condition. Only for a Node of
    /// the machine, as `kube.prepare_drain`.
    ///
    /// # Idempotency
    /// A Node with none of these is left as it is.
    #[activity(name = "kube.uncordon_node")]
    pub async fn uncordon_node(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: MachineNode,
    ) -> Result<NodeChange, ActivityError> {
        drain::uncordon_node(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// `machine uncordon`: removes the draining taint (other taints kept) and the
    /// `Terminating` condition, and clears `spec.unschedulable` unless the cordon was there
    /// before nodewright's drain and `force` is not set
    /// (`model::machine::uncordon::plan_uncordon`). Only for a Node of the machine, as
    /// `kube.prepare_drain`.
    ///
    /// # Idempotency
    /// Reads before it writes; a Node already as planned is left as it is.
    #[activity(name = "kube.uncordon_machine_node")]
    pub async fn uncordon_machine_node(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: uncordon::UncordonNode,
    ) -> Result<nodewright_model::machine::uncordon::UncordonOutcome, ActivityError> {
        uncordon::uncordon(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Lists the pool's Nodes (label `nodewright.io/pool=<pool>`), sorted by name: providerID,
    /// whether Ready and since when, whether being taken down (draining taint or deletion
    /// timestamp), whether tainted `nodewright.io/outdated`, its conditions, its delete priority
    /// and, with `lease_timeout_secs`, whether its Lease in `kube-node-lease` went stale.
    ///
    /// # Idempotency
    /// Read-only: a rerun reads again.
    #[activity(name = "kube.list_pool_nodes")]
    pub async fn list_pool_nodes(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: ListPoolNodes,
    ) -> Result<Vec<PoolNode>, ActivityError> {
        pool::list_pool_nodes(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// [`Self::list_pool_nodes`] as the changes since the list the workflow holds
    /// (`model::listing`): only the Nodes new or changed and the names gone when this worker
    /// sent that list lately, else the whole list.
    ///
    /// # Idempotency
    /// Read-only: a rerun reads again.
    #[activity(name = "kube.list_pool_nodes_since")]
    pub async fn list_pool_nodes_since(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: Since<ListPoolNodes>,
    ) -> Result<Listing<PoolNode>, ActivityError> {
        let nodes = pool::list_pool_nodes(&self.client, &input.of)
            .await
            .map_err(Error::into_activity_error)?;
        Ok(self.node_listings.answer(input.since.as_deref(), nodes))
    }

    /// [`Self::list_pool_nodes_since`], answered as soon as the pool's Nodes differ from the list
    /// the workflow holds, or after `max_wait_secs` with "unchanged" (the held list's digest as
    /// base and digest, no items). Watches the Nodes (and, with a lease timeout, the Leases of
    /// `kube-node-lease`) from the state the worker's previous look kept, or else from a list; a
    /// Node status heartbeat changes nothing the pool sees, so it never ends the wait
    /// (`node_watch`). Heartbeats every few seconds and stops at once when cancelled.
    ///
    /// # Idempotency
    /// Read-only: a rerun watches again (from the kept state, or a list).
    #[activity(name = "kube.watch_pool_nodes")]
    pub async fn watch_pool_nodes(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: Since<WatchPoolNodes>,
    ) -> Result<Listing<PoolNode>, ActivityError> {
        lifetime::until_cancelled(&ctx, async {
            node_watch::watch_pool_nodes(
                &self.client,
                &ctx,
                &self.node_listings,
                &self.node_watches,
                &input,
            )
            .await
            .map_err(Error::into_activity_error)
        })
        .await
    }

    /// Reads the do-not-disrupt marks (`nodewright.io/do-not-disrupt`,
    /// `karpenter.sh/do-not-disrupt`) on the machine's Node and on the active pods bound to it.
    ///
    /// # Idempotency
    /// Read-only: a rerun reads again. A missing Node has no marks.
    #[activity(name = "kube.disruption_marks")]
    pub async fn disruption_marks(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: DisruptionMarksOf,
    ) -> Result<NodeMarks, ActivityError> {
        disruption::disruption_marks(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Taints each machine's Node `nodewright.io/outdated:PreferNoSchedule` (`outdated`) or
    /// removes that taint, every other taint kept (read-modify-write with the
    /// `resourceVersion`, field manager `nodewright-rollout`). Only a Node whose providerID names
    /// the VM and that carries `nodewright.io/machine=<node>` is written; the others are
    /// reported as absent or not ours.
    ///
    /// # Idempotency
    /// A Node already as asked is not written (and not reported as changed). A Node changed by
    /// another writer meanwhile is read again (409), a few times, then the activity fails
    /// retryably.
    #[activity(name = "kube.mark_outdated")]
    pub async fn mark_outdated(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: MarkOutdated,
    ) -> Result<MarkedOutdated, ActivityError> {
        pool::mark_outdated(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Writes the pool's drain settings on each machine's Node: the `nodewright.io/drain-policy`
    /// annotation with an operator's edits kept, and its stamp
    /// `nodewright.io/drain-policy-stamp` (`model::drain::restamp`); field manager
    /// `nodewright-rollout`. Only a Node whose providerID names the VM and that carries
    /// `nodewright.io/machine=<node>` is written; the others are reported.
    ///
    /// # Idempotency
    /// A Node already so is not written. A Node changed meanwhile is read again (409), a few
    /// times, then the activity fails retryably.
    #[activity(name = "kube.restamp_drain_policy")]
    pub async fn restamp_drain_policy(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: RestampDrain,
    ) -> Result<DrainRestamped, ActivityError> {
        restamp::restamp_drain(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Deletes the machine's join token Secret `kube-system/bootstrap-token-<id>` (minted by
    /// `azure.begin_vm_create` for a template with `bootstrapToken`), only when its labels say it
    /// is this cluster's machine's, with a UID precondition.
    ///
    /// # Idempotency
    /// An absent Secret (never minted, deleted already) is reported absent; one of someone else
    /// is left alone and reported so.
    #[activity(name = "kube.delete_bootstrap_token")]
    pub async fn delete_bootstrap_token(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: DeleteBootstrapToken,
    ) -> Result<TokenDeleted, ActivityError> {
        JoinTokens::kubernetes(self.client.clone())
            .delete(&input)
            .await
            .map_err(join_token::JoinTokenError::into_activity_error)
    }

    /// Records a Warning Event (events.k8s.io/v1) about a Node, e.g. a drain-policy annotation
    /// the drain refused, so `kubectl describe node` shows it.
    ///
    /// # Idempotency
    /// The Event's name comes from the workflow (the same on every attempt): one already there
    /// is an earlier attempt's, reported as such. No Node: nothing is recorded.
    #[activity(name = "kube.record_node_event")]
    pub async fn record_node_event(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: NodeEvent,
    ) -> Result<EventRecorded, ActivityError> {
        events::record_node_event(&self.client, &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Records a Normal Event about a pool (regarding the identity ConfigMap), e.g. a newer
    /// image version under `imageUpdate: notify`.
    ///
    /// # Idempotency
    /// The Event's name comes from the workflow (the same on every attempt): one already there
    /// is an earlier attempt's, reported as such.
    #[activity(name = "kube.record_pool_event")]
    pub async fn record_pool_event(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: PoolEvent,
    ) -> Result<EventRecorded, ActivityError> {
        events::record_pool_event(&self.client, self.identity_namespace(), &input)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Deletes the machine's Node object (only when its providerID names the machine's VM).
    ///
    /// # Idempotency
    /// An absent Node is reported as such.
    #[activity(name = "kube.delete_node")]
    pub async fn delete_node(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: MachineNode,
    ) -> Result<NodeChange, ActivityError> {
        let deleted = nodes::delete(&self.client, &input).await;
        if let Ok(NodeChange::Done) = deleted {
            let occurrence = node_story::Occurrence {
                node: &input.node,
                reason: "Deleted",
                action: "Delete",
                subject: "",
                note: format!("the machine's Node is deleted ({})", input.vm_id),
                warning: false,
            };
            self.story.tell_gone(&self.client, occurrence).await;
        }
        deleted.map_err(Error::into_activity_error)
    }

    /// Whether the Kubernetes API is healthy: `/readyz` answers `ok`, a Node read answers
    /// (a 404 is the healthy answer) and, on the worker, the API carries the identity of the
    /// worker's cluster (`nodewright_model::identity`): an API that is another cluster, or carries
    /// no identity, is not healthy. Never fails: an unhealthy API is the answer, not an error.
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "kube.api_health")]
    pub async fn api_health(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _input: (),
    ) -> Result<ApiHealth, ActivityError> {
        let health = self.checked_api_health().await;
        crate::metrics::freeze_check(!health.healthy);
        Ok(health)
    }

    /// [`Self::api_health`]'s answer.
    async fn checked_api_health(&self) -> ApiHealth {
        let health = sweep::api_health(&self.client).await;
        let Some(identity) = self.identity.as_ref().filter(|_| health.healthy) else {
            return health;
        };
        let checked = if self.established.load(Ordering::SeqCst) {
            identity::verify(&self.client, identity).await
        } else {
            identity::establish(&self.client, identity)
                .await
                .map(|_| ())
        };
        if checked.is_ok() {
            self.established.store(true, Ordering::SeqCst);
        }
        match checked {
            Ok(()) => ApiHealth {
                healthy: true,
                detail: format!(
                    "{}; the API is cluster {} ({})",
                    health.detail,
                    nodewright_model::text::quoted(identity.cluster.as_str()),
                    identity.config_map()
                ),
            },
            Err(error) => ApiHealth {
                healthy: false,
                detail: nodewright_model::text::error_chain(&error),
            },
        }
    }

    /// One page of Nodes (name, uid, providerID, nodewright labels, Ready condition), and the
    /// token of the next.
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "kube.list_nodes_page")]
    pub async fn list_nodes_page(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: ListNodesPage,
    ) -> Result<NodesPage, ActivityError> {
        lifetime::heartbeating(&ctx, sweep::list_nodes_page(&self.client, &input))
            .await
            .map_err(Error::into_activity_error)
    }

    /// The Azure disks PersistentVolumes use (lower-cased names), every page.
    ///
    /// # Idempotency
    /// Read-only.
    #[activity(name = "kube.volume_disks")]
    pub async fn volume_disks(
        self: Arc<Self>,
        _ctx: ActivityContext,
        _input: (),
    ) -> Result<std::collections::BTreeSet<String>, ActivityError> {
        sweep::volume_disks(&self.client)
            .await
            .map_err(Error::into_activity_error)
    }

    /// Deletes an orphan Node, conditional on the uid it was listed with, when it is still not
    /// Ready.
    ///
    /// # Idempotency
    /// Gone is reported as such; a recreated or Ready-again Node is left alone.
    #[activity(name = "kube.delete_orphan_node")]
    pub async fn delete_orphan_node(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: DeleteOrphanNode,
    ) -> Result<OrphanNodeDeleted, ActivityError> {
        let deleted = sweep::delete_orphan_node(&self.client, &input).await;
        if let Ok(OrphanNodeDeleted::Deleted) = deleted {
            crate::metrics::sweep_deletion("node");
        }
        deleted.map_err(Error::into_activity_error)
    }
}
