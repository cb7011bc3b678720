//! Waiting on objects through a watch instead of reads every few seconds: one named object, the
//! objects a field selector picks (a Node's pods), or all of a kind (VolumeAttachments, which
//! have no field selector for their node, filtered by the judge). Their state comes from
//! kube-runtime's watcher (a list, page by page, then a watch from its `resourceVersion`; it
//! watches again after a disconnect from the last version it saw and lists again when that
//! version expired, so no change is missed), a read (GET or LIST) re-reads them every
//! [`SAFETY_READ`] in case the watch is failing, and the wait heartbeats at least every
//! [`HEARTBEAT`]. A wait that reaches its deadline before anything was seen reads the objects
//! once, so that a timed-out wait reports what is there, never an empty guess.
//!
//! A watch that keeps failing (the apiserver refusing `watch`, a proxy cutting streams) makes
//! the wait slower, never wrong: every [`SAFETY_READ`] the read decides as a poll would.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::error::Result;
use crate::lifetime::Heartbeat;

/// How often the objects are read (a GET or LIST) besides the watch.
pub const SAFETY_READ: Duration = Duration::from_secs(30);
/// The longest wait between two heartbeats.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// How a follow ended.
#[derive(Debug)]
pub enum Followed<K, T> {
    /// The judge accepted the object's state (or its absence) with this.
    Done(T),
    /// The deadline came first; the objects as last seen (read at the deadline when nothing was
    /// seen before).
    TimedOut(Objects<K>),
}

/// Objects by `namespace/name` (`name` for cluster-scoped ones).
pub type Objects<K> = BTreeMap<String, K>;

/// The key of an object in [`Objects`].
pub fn key_of<K: Resource>(object: &K) -> String {
    let meta = object.meta();
    let name = meta.name.clone().unwrap_or_default();
    match &meta.namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name,
    }
}

/// The latest known state of the followed objects.
struct Latest<K> {
    objects: Objects<K>,
    /// Whether a list, a watch event or a read told anything yet.
    known: bool,
    /// The objects while the watcher (re)lists, until its `InitDone`.
    listing: Option<Objects<K>>,
}

impl<K: Resource> Latest<K> {
    /// Takes in one watcher event.
    fn apply(&mut self, event: Event<K>) {
        match event {
            Event::Apply(object) => {
                self.objects.insert(key_of(&object), object);
                self.known = true;
            }
            Event::Delete(object) => {
                self.objects.remove(&key_of(&object));
                self.known = true;
            }
            Event::Init => self.listing = Some(Objects::new()),
            Event::InitApply(object) => {
                if let Some(listing) = &mut self.listing {
                    listing.insert(key_of(&object), object);
                }
            }
            Event::InitDone => {
                if let Some(listed) = self.listing.take() {
                    self.set(listed);
                }
            }
        }
    }

    fn set(&mut self, objects: Objects<K>) {
        self.objects = objects;
        self.known = true;
    }
}

/// Follows the object `name` of `api` until `judge` accepts its state (the object, or none when
/// it is absent) or `deadline` passes; `read` is the GET of the safety re-read.
pub async fn follow_object<K, T, Read, ReadFuture>(
    api: &Api<K>,
    name: &str,
    heartbeat: &impl Heartbeat,
    deadline: DateTime<Utc>,
    mut judge: impl FnMut(Option<&K>) -> Result<Option<T>>,
    read: Read,
) -> Result<Followed<K, T>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    Read: Fn() -> ReadFuture,
    ReadFuture: Future<Output = Result<Option<K>>>,
{
    let selector = format!("metadata.name={name}");
    follow(
        api,
        &selector,
        heartbeat,
        deadline,
        |objects| judge(objects.values().next()),
        || async {
            Ok(read()
                .await?
                .into_iter()
                .map(|object| (key_of(&object), object))
                .collect())
        },
    )
    .await
}

/// Follows the objects of `api` that `field_selector` picks (all of them when it is empty) until
/// `judge` accepts them (called each time they are known to have changed, and after every
/// [`SAFETY_READ`]) or `deadline` passes; `read` is the safety re-read (a GET or LIST of the
/// same objects, every page of it), also made at the deadline when nothing was seen yet.
pub async fn follow<K, T, Read, ReadFuture>(
    api: &Api<K>,
    field_selector: &str,
    heartbeat: &impl Heartbeat,
    deadline: DateTime<Utc>,
    mut judge: impl FnMut(&Objects<K>) -> Result<Option<T>>,
    read: Read,
) -> Result<Followed<K, T>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    Read: Fn() -> ReadFuture,
    ReadFuture: Future<Output = Result<Objects<K>>>,
{
    let mut config = watcher::Config::default();
    if !field_selector.is_empty() {
        config = config.fields(field_selector);
    }
    let mut events = watcher::watcher(api.clone(), config)
        .default_backoff()
        .boxed();
    let mut latest = Latest {
        objects: Objects::new(),
        known: false,
        listing: None,
    };
    let mut next_read = tokio::time::Instant::now() + SAFETY_READ;
    let mut warned = false;
    loop {
        heartbeat.beat().await;
        let left = (deadline - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        if left.is_zero() && !latest.known {
            latest.set(read().await?);
        }
        if latest.known
            && let Some(done) = judge(&latest.objects)?
        {
            return Ok(Followed::Done(done));
        }
        if left.is_zero() {
            return Ok(Followed::TimedOut(latest.objects));
        }
        let until_read = next_read.saturating_duration_since(tokio::time::Instant::now());
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(event)) => latest.apply(event),
                Some(Err(error)) => {
                    // The watcher tries again after a back-off; the safety read goes on.
                    if !warned {
                        tracing::warn!(%error, field_selector, "watch failing; reading every {}s meanwhile", SAFETY_READ.as_secs());
                        warned = true;
                    }
                }
                None => events = futures::stream::pending().boxed(),
            },
            () = tokio::time::sleep(left.min(HEARTBEAT).min(until_read)) => {}
        }
        if tokio::time::Instant::now() >= next_read {
            latest.set(read().await?);
            next_read = tokio::time::Instant::now() + SAFETY_READ;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    fn pod(name: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.to_owned());
        pod.metadata.namespace = Some("shop".to_owned());
        pod
    }

    fn keys(latest: &Latest<Pod>) -> Vec<&str> {
        latest.objects.keys().map(String::as_str).collect()
    }

    #[test]
    fn a_relist_replaces_the_state_only_when_it_is_done() {
        let mut latest = Latest {
            objects: Objects::new(),
            known: false,
            listing: None,
        };
        latest.apply(Event::Init);
        latest.apply(Event::InitApply(pod("a")));
        assert!(!latest.known, "nothing known before the first list ends");
        latest.apply(Event::InitDone);
        assert_eq!(keys(&latest), ["shop/a"]);
        latest.apply(Event::Init);
        latest.apply(Event::InitApply(pod("b")));
        assert_eq!(keys(&latest), ["shop/a"], "not replaced before InitDone");
        latest.apply(Event::InitDone);
        assert_eq!(keys(&latest), ["shop/b"], "a relist without a: a is gone");
        latest.apply(Event::Apply(pod("c")));
        assert_eq!(keys(&latest), ["shop/b", "shop/c"]);
        latest.apply(Event::Delete(pod("b")));
        assert_eq!(keys(&latest), ["shop/c"]);
    }

    struct Beats;

    impl Heartbeat for Beats {
        async fn beat(&self) {}
    }

    /// A client whose every request fails: the watcher never answers.
    fn unreachable() -> kube::Client {
        let refuse = tower::service_fn(|_: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("unreachable"))
        });
        kube::Client::new(refuse, "default")
    }

    #[tokio::test]
    async fn a_wait_at_its_deadline_with_nothing_seen_reads_once() {
        let api: Api<Pod> = Api::all(unreachable());
        let reads = std::sync::atomic::AtomicUsize::new(0);
        let past = Utc::now() - chrono::Duration::seconds(5);
        let followed = follow(
            &api,
            "",
            &Beats,
            past,
            |pods| Ok(pods.is_empty().then_some(())),
            || async {
                reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(Objects::from([("shop/a".to_owned(), pod("a"))]))
            },
        )
        .await;
        assert!(
            matches!(&followed, Ok(Followed::TimedOut(pods)) if pods.contains_key("shop/a")),
            "what the read found, not an empty guess: {followed:?}"
        );
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_read_at_the_deadline_can_end_the_wait() {
        let api: Api<Pod> = Api::all(unreachable());
        let past = Utc::now() - chrono::Duration::seconds(5);
        let followed = follow(
            &api,
            "spec.nodeName=n-1",
            &Beats,
            past,
            |pods| Ok(pods.is_empty().then_some("gone")),
            || async { Ok(Objects::new()) },
        )
        .await;
        assert!(
            matches!(followed, Ok(Followed::Done("gone"))),
            "{followed:?}"
        );
    }

    #[test]
    fn cluster_scoped_objects_are_keyed_by_name() {
        let mut node = k8s_openapi::api::core::v1::Node::default();
        node.metadata.name = Some("n-1".to_owned());
        assert_eq!(key_of(&node), "n-1");
        assert_eq!(key_of(&pod("a")), "shop/a");
    }
}
