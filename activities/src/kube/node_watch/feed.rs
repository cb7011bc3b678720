//! One collection (a pool's Nodes, the Node Leases) kept up to date at the cost of one list and
//! one watch: the list first, then a watch from the list's `resourceVersion` (bookmarks on, so
//! the version stays recent), watched again from the last version seen when the apiserver ends
//! it, and listed again when the version expired (410 Gone).
//!
//! The feed is a stream ([`changes`]), so that a `select!` over it and a timer never drops a list
//! half read: the list or watch under way lives in the stream, not in the branch.

use std::fmt::Debug;
use std::time::Duration;

use futures::stream::{BoxStream, Stream, StreamExt};
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

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

/// The changes of the collection in `scope`, forever, or until the first error (after which the
/// stream ends).
pub(super) fn changes<K>(scope: Scope<K>) -> impl Stream<Item = Result<Change<K>, FeedError>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let feed = Feed {
        scope,
        resource_version: None,
        events: None,
        watched_since: None,
        failed: false,
    };
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
struct Feed<K> {
    scope: Scope<K>,
    /// The version to watch from; none: list (first, or after a 410).
    resource_version: Option<String>,
    /// The watch under way.
    events: Option<BoxStream<'static, kube::Result<WatchEvent<K>>>>,
    /// When the watch under way (or the last one) started; none before the first.
    watched_since: Option<tokio::time::Instant>,
    /// An error was returned: the stream ends.
    failed: bool,
}

impl<K> Feed<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    async fn next(&mut self) -> Result<Change<K>, FeedError> {
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
                    let events = self
                        .scope
                        .api
                        .watch(&params, &version)
                        .await
                        .map_err(FeedError::Watch)?;
                    self.events.insert(events.boxed())
                }
            };
            match events.next().await {
                // The apiserver ended the watch (its timeout): watch again from where it was.
                None => self.events = None,
                Some(Err(error)) => return Err(FeedError::Watch(error)),
                Some(Ok(WatchEvent::Added(object) | WatchEvent::Modified(object))) => {
                    self.seen(&object);
                    return Ok(Change::Applied(object));
                }
                Some(Ok(WatchEvent::Deleted(object))) => {
                    self.seen(&object);
                    return Ok(Change::Deleted(object));
                }
                Some(Ok(WatchEvent::Bookmark(bookmark))) => {
                    self.resource_version = Some(bookmark.metadata.resource_version);
                }
                Some(Ok(WatchEvent::Error(status))) if status.code == GONE => {
                    tracing::debug!(
                        message = %status.message,
                        "the watch's resourceVersion expired: listing again"
                    );
                    self.resource_version = None;
                    self.events = None;
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    return Err(FeedError::Watch(kube::Error::Api(status)));
                }
            }
        }
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
        // then starts with every object, which applies as the list did).
        self.resource_version = Some(
            listed
                .metadata
                .resource_version
                .clone()
                .unwrap_or_else(|| "0".to_owned()),
        );
        self.events = None;
        Ok(Change::Listed(listed.items))
    }

    /// Watches on from `object`'s version.
    fn seen(&mut self, object: &K) {
        if let Some(version) = object.meta().resource_version.clone() {
            self.resource_version = Some(version);
        }
    }
}
