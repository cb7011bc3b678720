//! What the drains of one worker read again and again, kept by watches instead of reads and
//! shared by all of them: per drained Node, the Node and its pods (by field selector, so a
//! worker holds only the pods of the Nodes it drains); cluster-wide, the Namespaces and the
//! PodDisruptionBudgets (few, and a budget may select pods of any Node). Each is mirrored
//! through kube-runtime's reflector: a list from the apiserver's watch cache, then a watch
//! from its `resourceVersion`, resumed after a disconnect and listed again after a 410.
//!
//! A mirror starts on its first use. A Node's mirrors stop after [`IDLE`] without use (the
//! longest pause between eviction rounds is 5 minutes); the cluster-wide ones run for the
//! worker's life. A mirror answers only while it is **in sync**: listed, and no watch error
//! since its last event. Otherwise the caller reads the apiserver, as it would without
//! mirrors: a worker whose role lacks `watch` drains as before, only with more requests.
//! Managed fields are dropped from the mirrored objects; the rest is kept as sent.
//!
//! Mirrors never decide alone what could lose a pod: a drain's plan and its last look read the
//! apiserver; mirrors serve the looks between eviction rounds and the refusals' details.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

/// How long a drained Node's mirrors live without use.
pub const IDLE: Duration = Duration::from_secs(600);

/// One kind mirrored: its store, whether it is in sync, and the task that keeps it.
struct Mirror<K: Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    in_sync: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl<K> Mirror<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// Starts mirroring the objects of `api`'s kind that `fields` selects (all without one);
    /// `what` names them in the logs.
    fn start(api: Api<K>, fields: Option<String>, what: String) -> Self {
        let (store, writer) = reflector::store();
        let in_sync = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&in_sync);
        let mut config = watcher::Config::default().any_semantic();
        if let Some(fields) = &fields {
            config = config.fields(fields);
        }
        let events = watcher::watcher(api, config)
            .default_backoff()
            .modify(|object: &mut K| object.managed_fields_mut().clear())
            .reflect(writer);
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            let mut warned = false;
            while let Some(event) = events.next().await {
                match event {
                    Ok(Event::InitDone | Event::Apply(_) | Event::Delete(_)) => {
                        if !flag.swap(true, Ordering::SeqCst) {
                            debug!(what = %what, "mirror in sync");
                        }
                    }
                    Ok(Event::Init | Event::InitApply(_)) => {}
                    Err(error) => {
                        flag.store(false, Ordering::SeqCst);
                        if !warned {
                            warned = true;
                            warn!(
                                what = %what,
                                %error,
                                "a drain mirror's watch failed; the drains read the apiserver until it works again"
                            );
                        }
                    }
                }
            }
        });
        Self {
            store,
            in_sync,
            task,
        }
    }

    /// The store, while it is in sync.
    fn current(&self) -> Option<&Store<K>> {
        self.in_sync.load(Ordering::SeqCst).then_some(&self.store)
    }
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Drop for Mirror<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A drained Node's mirrors: the Node and the pods bound to it.
struct NodeMirror {
    node: Mirror<Node>,
    pods: Mirror<Pod>,
    last_used: Instant,
}

/// The mirrors of one worker.
#[derive(Default)]
pub struct ClusterCache {
    nodes: Mutex<BTreeMap<String, Arc<Mutex<NodeMirror>>>>,
    namespaces: OnceLock<Mirror<Namespace>>,
    budgets: OnceLock<Mirror<PodDisruptionBudget>>,
}

impl Debug for ClusterCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes = self
            .nodes
            .lock()
            .map(|nodes| nodes.len())
            .unwrap_or_default();
        f.debug_struct("ClusterCache")
            .field("nodes", &nodes)
            .field("namespaces", &self.namespaces.get().is_some())
            .field("budgets", &self.budgets.get().is_some())
            .finish()
    }
}

impl ClusterCache {
    /// The mirrored Node `node` and its pods by namespace and name (as the apiserver lists
    /// them), while both mirrors are in sync and the Node is there; starts them on first use.
    pub fn node_and_pods(&self, client: &kube::Client, node: &str) -> Option<(Node, Vec<Pod>)> {
        self.with_node(client, node, |mirror| {
            let found = mirror.node.current()?.get(&ObjectRef::new(node))?;
            let mut pods: Vec<Pod> = mirror
                .pods
                .current()?
                .state()
                .iter()
                .map(|pod| Pod::clone(pod))
                .collect();
            pods.sort_by(|a, b| {
                let key = |pod: &Pod| (pod.metadata.namespace.clone(), pod.metadata.name.clone());
                key(a).cmp(&key(b))
            });
            Some((Node::clone(&found), pods))
        })
    }

    /// The mirrored pod `namespace/name` bound to `node`: `None` when the mirror is not in
    /// sync, `Some(None)` when it holds no such pod.
    pub fn pod_on(
        &self,
        client: &kube::Client,
        node: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Option<Arc<Pod>>> {
        self.with_node(client, node, |mirror| {
            let store = mirror.pods.current()?;
            Some(store.get(&ObjectRef::new(name).within(namespace)))
        })
    }

    /// The mirrored Namespaces, while in sync (started by the first call).
    pub fn namespaces(&self, client: &kube::Client) -> Option<&Store<Namespace>> {
        self.namespaces
            .get_or_init(|| Mirror::start(Api::all(client.clone()), None, "Namespaces".into()))
            .current()
    }

    /// The mirrored budget `namespace/name`: `None` when the mirror is not in sync (read the
    /// apiserver), `Some(None)` when it knows of no such budget.
    pub fn budget(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Option<Option<Arc<PodDisruptionBudget>>> {
        let store = self
            .budgets
            .get_or_init(|| {
                let api = Api::all(client.clone());
                Mirror::start(api, None, "PodDisruptionBudgets".into())
            })
            .current()?;
        Some(store.get(&ObjectRef::new(name).within(namespace)))
    }

    /// How many Nodes are mirrored now.
    pub fn mirrored_nodes(&self) -> usize {
        self.nodes
            .lock()
            .map(|nodes| nodes.len())
            .unwrap_or_default()
    }

    /// `read` on `node`'s mirrors (started if need be, marked used); the mirrors of Nodes
    /// unused for [`IDLE`] are stopped first.
    fn with_node<T>(
        &self,
        client: &kube::Client,
        node: &str,
        read: impl FnOnce(&NodeMirror) -> Option<T>,
    ) -> Option<T> {
        let mirror = {
            let mut nodes = self.nodes.lock().ok()?;
            let now = Instant::now();
            nodes.retain(|_, mirror| {
                mirror
                    .lock()
                    .is_ok_and(|mirror| now.duration_since(mirror.last_used) < IDLE)
            });
            let mirror = nodes
                .entry(node.to_owned())
                .or_insert_with(|| Arc::new(Mutex::new(start_node(client, node, now))));
            Arc::clone(mirror)
        };
        let mut mirror = mirror.lock().ok()?;
        mirror.last_used = Instant::now();
        read(&mirror)
    }
}

/// The mirrors of `node`: the Node by name, its pods by `spec.nodeName`.
fn start_node(client: &kube::Client, node: &str, now: Instant) -> NodeMirror {
    NodeMirror {
        node: Mirror::start(
            Api::all(client.clone()),
            Some(format!("metadata.name={node}")),
            format!("Node {node}"),
        ),
        pods: Mirror::start(
            Api::all(client.clone()),
            Some(format!("spec.nodeName={node}")),
            format!("the pods of Node {node}"),
        ),
        last_used: now,
    }
}
