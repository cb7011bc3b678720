//! One collection (a pool's Nodes, the Node Leases) kept up to date at the cost of one watch:
//! started from the state an earlier feed of the same scope kept ([`Start::Resume`]: its objects
//! are the first change, without a request, and the watch goes on from their `resourceVersion`),
//! or else from a list ([`Start::List`]); watched again from the last version seen when the
//! apiserver ends the watch (bookmarks on, so the version stays recent), and listed again when
//! the version expired (410 Gone). A resumed watch that fails before its first event lists
//! instead of failing: the kept version may be gone in ways a 410 does not say.
//!
//! A resumed watch replays every event after the kept version, so what the feed yields
//! converges to what a list would give. When the feed ends (dropped, not failed), its objects
//! and version are stored in the worker's [`FeedMemory`] for the next feed of the scope.
//!
//! The feed is a stream ([`changes`]), so that a `select!` over it and a timer never drops a list
//! half read: the list or watch under way lives in the stream, not in the branch.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{BoxStream, Stream, StreamExt};
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::memory::{FeedMemory, Kept, ScopeKey};

/// The HTTP status of an expired `resourceVersion`: the watch must list again.
const GONE: u16 = 410;

/// A watch that the apiserver ends sooner than this is started again only after this long, so
/// an apiserver that ends every watch at once is not asked again and again.
const REWATCH_AFTER: Duration = Duration::from_secs(1);

/// What changed in the collection.
pub(super) enum Change<K> {
    /// It was listed (first, or again after a 410): these objects are all there is.
    Listed(Vec<K>),
    /// An object was added or modified.
    Applied(K),
    /// An object was deleted.
    Deleted(K),
}

/// Which call failed.
#[derive(Debug)]
pub(super) enum FeedError {
    /// The list.
    List(kube::Error),
    /// Starting the watch, reading it, or an error it answered (other than 410 Gone).
    Watch(kube::Error),
}

/// Which objects a feed follows.
pub(super) struct Scope<K> {
    /// The collection.
    pub api: Api<K>,
    /// Its label selector, if any.
    pub labels: Option<String>,
}

impl<K: Resource> Scope<K> {
    /// The key its state is kept under.
    pub(super) fn key(&self) -> ScopeKey {
        ScopeKey::new(self.api.resource_url(), self.labels.as_deref())
    }
}

/// How a feed starts.
pub(super) enum Start<K> {
    /// With a list.
    List,
    /// From a state kept by an earlier feed of the scope: its objects, then a watch from its
    /// version.
    Resume(Kept<K>),
}

/// The changes of the collection in `scope`, started as `start` says, forever, or until the
/// first error (after which the stream ends). The state the feed ends with is stored in
/// `memory` when the stream is dropped, unless it failed.
pub(super) fn changes<'m, K>(
    scope: Scope<K>,
    start: Start<K>,
    memory: &'m FeedMemory<K>,
) -> impl Stream<Item = Result<Change<K>, FeedError>> + 'm
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let key = scope.key();
    let mut feed = Feed {
        scope,
        resource_version: None,
        seen_at: None,
        objects: Arc::default(),
        kept_to_yield: false,
        resuming: false,
        events: None,
        watched_since: None,
        failed: false,
        memory: Some((memory, key)),
    };
    if let Start::Resume(kept) = start {
        feed.resource_version = Some(kept.resource_version);
        feed.seen_at = Some(kept.seen_at);
        feed.objects = kept.objects;
        feed.kept_to_yield = true;
        feed.resuming = true;
    }
    futures::stream::unfold(feed, |mut feed| async move {
        if feed.failed {
            return None;
        }
        let next = feed.next().await;
        feed.failed = next.is_err();
        Some((next, feed))
    })
}

/// The state of a feed between two changes.
struct Feed<'m, K> {
    scope: Scope<K>,
    /// The version to watch from; none: list (first, or after a 410).
    resource_version: Option<String>,
    /// When the apiserver gave `resource_version` (none: it did not, or none yet).
    seen_at: Option<Instant>,
    /// The objects at `resource_version`, by namespace and name (shared with the kept state
    /// this feed resumed from until the first change).
    objects: Arc<BTreeMap<String, K>>,
    /// Resumed, and the kept objects not yielded yet.
    kept_to_yield: bool,
    /// Resumed, and no watch event read yet: a failure lists instead.
    resuming: bool,
    /// The watch under way.
    events: Option<BoxStream<'static, kube::Result<WatchEvent<K>>>>,
    /// When the watch under way (or the last one) started; none before the first.
    watched_since: Option<tokio::time::Instant>,
    /// An error was returned: the stream ends.
    failed: bool,
    /// Where the state is stored when the feed is dropped, and under which scope.
    memory: Option<(&'m FeedMemory<K>, ScopeKey)>,
}

impl<K> Feed<'_, K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    async fn next(&mut self) -> Result<Change<K>, FeedError> {
        if std::mem::take(&mut self.kept_to_yield) {
            return Ok(Change::Listed(self.objects.values().cloned().collect()));
        }
        loop {
            let Some(version) = self.resource_version.clone() else {
                return self.list().await;
            };
            let events = match &mut self.events {
                Some(events) => events,
                None => {
                    if let Some(watched_since) = self.watched_since {
                        tokio::time::sleep_until(watched_since + REWATCH_AFTER).await;
                    }
                    self.watched_since = Some(tokio::time::Instant::now());
                    let mut params = WatchParams::default();
                    if let Some(labels) = &self.scope.labels {
                        params = params.labels(labels);
                    }
                    match self.scope.api.watch(&params, &version).await {
                        Ok(events) => self.events.insert(events.boxed()),
                        Err(error) => {
                            self.list_instead(error)?;
                            continue;
                        }
                    }
                }
            };
            let event = events.next().await;
            match event {
                // The apiserver ended the watch (its timeout): watch again from where it was.
                None => self.events = None,
                Some(Err(error)) => self.list_instead(error)?,
                Some(Ok(WatchEvent::Error(status))) => {
                    self.list_instead(kube::Error::Api(status))?;
                }
                Some(Ok(WatchEvent::Added(object) | WatchEvent::Modified(object))) => {
                    self.resuming = false;
                    self.seen(&object);
                    let key = object_key(&object);
                    Arc::make_mut(&mut self.objects).insert(key, kept_copy(&object));
                    return Ok(Change::Applied(object));
                }
                Some(Ok(WatchEvent::Deleted(object))) => {
                    self.resuming = false;
                    self.seen(&object);
                    Arc::make_mut(&mut self.objects).remove(&object_key(&object));
                    return Ok(Change::Deleted(object));
                }
                Some(Ok(WatchEvent::Bookmark(bookmark))) => {
                    self.resuming = false;
                    self.resource_version = Some(bookmark.metadata.resource_version);
                    self.seen_at = Some(Instant::now());
                }
            }
        }
    }

    /// After the watch failed with `error`: lists next when the version expired (410 Gone) or
    /// the feed resumed and read no event yet; else the error ends the feed.
    fn list_instead(&mut self, error: kube::Error) -> Result<(), FeedError> {
        let gone = matches!(&error, kube::Error::Api(status) if status.code == GONE);
        if !gone && !self.resuming {
            return Err(FeedError::Watch(error));
        }
        tracing::debug!(
            error = %nodewright_model::text::error_chain(&error),
            resumed = self.resuming,
            "the watch's resourceVersion cannot be watched from: listing again"
        );
        self.resuming = false;
        self.resource_version = None;
        self.seen_at = None;
        self.events = None;
        Ok(())
    }

    async fn list(&mut self) -> Result<Change<K>, FeedError> {
        let mut params = ListParams::default();
        if let Some(labels) = &self.scope.labels {
            params = params.labels(labels);
        }
        let listed = self
            .scope
            .api
            .list(&params)
            .await
            .map_err(FeedError::List)?;
        // An apiserver always sets it; without one, "0" watches from any version (the watch
        // then starts with every object, which applies as the list did), and nothing is kept
        // for a later feed: "0" would not replay what was deleted since.
        self.seen_at = listed
            .metadata
            .resource_version
            .is_some()
            .then(Instant::now);
        self.resource_version = Some(
            listed
                .metadata
                .resource_version
                .clone()
                .unwrap_or_else(|| "0".to_owned()),
        );
        self.objects = Arc::new(
            listed
                .items
                .iter()
                .map(|object| (object_key(object), kept_copy(object)))
                .collect(),
        );
        self.events = None;
        Ok(Change::Listed(listed.items))
    }

    /// Watches on from `object`'s version.
    fn seen(&mut self, object: &K) {
        if let Some(version) = object.meta().resource_version.clone() {
            self.resource_version = Some(version);
            if self.seen_at.is_some() {
                self.seen_at = Some(Instant::now());
            }
        }
    }
}

impl<K> Drop for Feed<'_, K> {
    /// Stores the state the feed ends with for the next feed of its scope: whole whenever the
    /// feed is dropped (the objects and their version change together, between two awaits),
    /// unless it failed or the apiserver gave no version.
    fn drop(&mut self) {
        let Some((memory, key)) = self.memory.take() else {
            return;
        };
        if self.failed {
            return;
        }
        if let (Some(resource_version), Some(seen_at)) =
            (self.resource_version.take(), self.seen_at)
        {
            let objects = std::mem::take(&mut self.objects);
            memory.store(
                key,
                Kept {
                    objects,
                    resource_version,
                    seen_at,
                },
            );
        }
    }
}

/// An object's key among the feed's objects: its namespace and name.
fn object_key<K: Resource>(object: &K) -> String {
    let meta = object.meta();
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// `object` as kept between feeds: without its managed fields, which nothing reads and which
/// are most of a Node's metadata.
fn kept_copy<K: Resource + Clone>(object: &K) -> K {
    let mut copy = object.clone();
    copy.meta_mut().managed_fields = None;
    copy
}
