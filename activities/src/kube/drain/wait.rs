//! Bounded, heartbeating waits: the polling loop of the drain waits that cannot follow a watch,
//! and the wait for evicted pods to disappear.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use nodewright_model::drain::PodRef;

use super::listing::pods_on_node;
use super::{AwaitPodsGone, Pending};
use crate::kube::error::{Error, Result};
use crate::kube::follow::{Followed, Objects, follow, key_of};
pub use crate::lifetime::Heartbeat;

/// How often a drain wait looks again.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How many pods are read at once while waiting for them to go.
const CONCURRENT_READS: usize = 8;

/// Looks with `observe` until `done` accepts what it saw or `deadline` passes, heartbeating
/// before each look and sleeping [`POLL_INTERVAL`] (never past the deadline) between looks.
/// Returns the last observation; there is always at least one.
pub(super) async fn poll_until<T, Observe, Seen>(
    heartbeat: &impl Heartbeat,
    deadline: DateTime<Utc>,
    mut observe: Observe,
    done: impl Fn(&T) -> bool,
) -> Result<T>
where
    Observe: FnMut() -> Seen,
    Seen: Future<Output = Result<T>>,
{
    loop {
        heartbeat.beat().await;
        let seen = observe().await?;
        let left = (deadline - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        if done(&seen) || left.is_zero() {
            return Ok(seen);
        }
        tokio::time::sleep(POLL_INTERVAL.min(left)).await;
    }
}

/// Waits until every pod of `input` is absent or has another UID, heartbeating, until the
/// deadline; returns the `namespace/name` keys still present then. With the Node named, its pods
/// are followed through one watch (`kube::follow`, a LIST of them every 30 s besides); without,
/// each pod is read every second.
pub async fn await_pods_gone(
    client: &kube::Client,
    heartbeat: &impl Heartbeat,
    input: &AwaitPodsGone,
) -> Result<Pending> {
    if let Some(node) = &input.node {
        return await_pods_gone_from(client, heartbeat, node, input).await;
    }
    let deadline = input.deadline;
    let pending = poll_until(
        heartbeat,
        deadline,
        || pods_present(client, &input.pods),
        Vec::is_empty,
    )
    .await?;
    Ok(Pending { pending })
}

/// [`await_pods_gone`] through a watch of `node`'s pods.
async fn await_pods_gone_from(
    client: &kube::Client,
    heartbeat: &impl Heartbeat,
    node: &str,
    input: &AwaitPodsGone,
) -> Result<Pending> {
    let api: Api<Pod> = Api::all(client.clone());
    let selector = format!("spec.nodeName={node}");
    let followed = follow(
        &api,
        &selector,
        heartbeat,
        input.deadline,
        |on_node| {
            let pending = still_here(&input.pods, on_node);
            Ok(pending.is_empty().then_some(pending))
        },
        || async {
            let pods = pods_on_node(client, node).await?;
            Ok(pods.into_iter().map(|pod| (key_of(&pod), pod)).collect())
        },
    )
    .await?;
    Ok(Pending {
        pending: match followed {
            Followed::Done(pending) => pending,
            Followed::TimedOut(on_node) => still_here(&input.pods, &on_node),
        },
    })
}

/// The keys of the `wanted` pods among the Node's pods `on_node` (same name and UID).
fn still_here(wanted: &[PodRef], on_node: &Objects<Pod>) -> Vec<String> {
    wanted
        .iter()
        .filter(|pod| {
            on_node
                .get(&pod.key())
                .is_some_and(|found| is_same_pod(found, pod))
        })
        .map(PodRef::key)
        .collect()
}

/// The keys of the pods in `pods` still present (same name and UID).
async fn pods_present(client: &kube::Client, pods: &[PodRef]) -> Result<Vec<String>> {
    // The futures are built first: a stream holding the closure trips the `Send` check of
    // the activity's future (the closure's lifetime is not general enough).
    let reads: Vec<_> = pods.iter().map(|pod| pod_present(client, pod)).collect();
    let reads = futures::stream::iter(reads)
        .buffered(CONCURRENT_READS)
        .collect::<Vec<_>>()
        .await;
    let mut present = Vec::new();
    for read in reads {
        if let Some(key) = read? {
            present.push(key);
        }
    }
    Ok(present)
}

/// `Some(key)` while `wanted` is there.
async fn pod_present(client: &kube::Client, wanted: &PodRef) -> Result<Option<String>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &wanted.namespace);
    let found = api
        .get_opt(&wanted.name)
        .await
        .map_err(|source| Error::GetPod {
            pod: wanted.key(),
            source,
        })?;
    Ok(found
        .is_some_and(|pod| is_same_pod(&pod, wanted))
        .then(|| wanted.key()))
}

/// Whether `found` is the pod `wanted` names: same UID (any pod of the name when `wanted` has
/// no UID). A pod recreated under the same name (a StatefulSet's) has another UID.
pub(super) fn is_same_pod(found: &Pod, wanted: &PodRef) -> bool {
    wanted.uid.is_empty() || found.metadata.uid.as_deref() == Some(wanted.uid.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": { "name": "db-0", "namespace": "shop", "uid": uid },
        }))
        .unwrap_or_default()
    }

    fn wanted(uid: &str) -> PodRef {
        PodRef {
            namespace: "shop".into(),
            name: "db-0".into(),
            uid: uid.into(),
            grace_period_seconds: 30,
        }
    }

    #[test]
    fn a_pod_recreated_under_the_same_name_is_another_pod() {
        assert!(is_same_pod(&pod("u-1"), &wanted("u-1")));
        assert!(!is_same_pod(&pod("u-2"), &wanted("u-1")));
        assert!(is_same_pod(&pod("u-2"), &wanted("")));
    }

    struct Count(std::sync::atomic::AtomicUsize);

    impl Heartbeat for Count {
        async fn beat(&self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[tokio::test]
    async fn a_wait_looks_once_even_past_its_deadline_and_heartbeats_each_look() {
        let beats = Count(Default::default());
        let past = Utc::now() - chrono::Duration::seconds(5);
        let seen = poll_until(
            &beats,
            past,
            || async { Ok(vec!["shop/db-0"]) },
            Vec::is_empty,
        )
        .await;
        assert_eq!(seen.ok(), Some(vec!["shop/db-0"]));
        assert_eq!(beats.0.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_wait_ends_as_soon_as_it_is_done() {
        let beats = Count(Default::default());
        let later = Utc::now() + chrono::Duration::seconds(60);
        let mut looks = 0;
        let seen = poll_until(
            &beats,
            later,
            || {
                looks += 1;
                let left = 2 - looks.min(2);
                async move { Ok(left) }
            },
            |left| *left == 0,
        )
        .await;
        assert_eq!(seen.ok(), Some(0));
        assert_eq!(beats.0.load(std::sync::atomic::Ordering::Relaxed), 2);
    }
}
