//! `kube.watch_pool_nodes`: a pool's Nodes as `kube.list_pool_nodes_since` sends them, answered
//! as soon as they differ from the list the workflow holds, or after a bounded wait.
//!
//! The point is cost: a pool controller looks at its Nodes again and again, and a steady pool of
//! 200 Nodes must cost no requests beyond one watch per look. So the Nodes are watched by the
//! pool's label ([`feed`]); with a lease timeout the Leases of `kube-node-lease` are too (a Lease
//! cannot be selected by its Node's labels: the whole namespace is watched, its renewals kept by
//! name), and staleness is judged again every few seconds from the renewals kept, without a
//! request. Each feed's state (the objects and the `resourceVersion` they are at) is kept in
//! the worker ([`WatchMemory`]) when the look ends, and the next look of the same pool on that
//! worker starts from it without a request and watches from its version ([`resume`]: only when
//! it makes the list the workflow holds, at most 4 minutes after the apiserver gave the
//! version); otherwise the look lists first, then watches from the list's version: a first look,
//! a look on another worker or after a worker restart, a state too old. Each change is
//! projected ([`view`]): a Node status heartbeat changes no projected field, so it never ends
//! the wait; a condition's transition, a taint, a delete priority, a Node added or gone, or a
//! Lease going stale does, at once.
//!
//! # Expected Flow
//! 1. Start from the kept states (no request) when [`resume`] allows it, else list the Nodes
//!    (and the Leases). A list other than the one held (or none held) answers at once.
//! 2. Watch; each event updates the view (with every change that already arrived, so a burst,
//!    as a resumed watch replays, answers as one list), and a list other than the one held
//!    answers.
//! 3. Every [`HEARTBEAT_EVERY`]: heartbeat, and judge the Leases again.
//! 4. After `max_wait_secs`: answer "unchanged" (the held list's digest as base and digest, no
//!    items).
//! 5. When the look ends (answered, failed or cancelled), each feed that did not fail keeps its
//!    state for the next look.
//!
//! A 410 Gone lists again, as does any failure of a resumed watch before its first event; a
//! watch the apiserver ends is started again from the last version seen. Any other failure ends
//! the look with its error (the workflow's retry looks again).

mod feed;
mod memory;
mod resume;
mod view;

use std::time::Duration;

use chrono::Utc;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use nodewright_model::listing::{Listing, Since};
use nodewright_model::rollout::PoolNode;
use serde::{Deserialize, Serialize};

use crate::lifetime::HEARTBEAT_EVERY;
use crate::listing_cache::ListingCache;

use super::drain::Heartbeat;
use super::error::{Error, Result};
use super::node_lease::NODE_LEASE_NAMESPACE;
use super::pool::pool_selector;
use feed::{Change, FeedError, Scope, changes};
pub use memory::WatchMemory;
use view::{Awaited, PoolView};

/// Watch the Nodes of a pool until they differ from the list held, or `max_wait_secs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchPoolNodes {
    /// The pool: Nodes labelled `nodewright.io/pool=<pool>` are watched.
    pub pool: String,
    /// With a lease timeout (seconds), the Leases of `kube-node-lease` are watched too, and a
    /// Node whose Lease was last renewed longer ago than that carries `lease_stale_since`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_timeout_secs: Option<u64>,
    /// Return after this long even if nothing changed (the workflow's observe interval).
    pub max_wait_secs: u64,
}

/// Watches the pool's Nodes (see the module doc) and answers as `kube.list_pool_nodes_since`
/// does, from `listings` (the worker's lists sent lately): the changes since the list held, the
/// whole list, or, when nothing changed within `max_wait_secs`, "unchanged" ([`unchanged`]).
/// Starts from and keeps its feeds' states in `memory` (the worker's). Heartbeats through
/// `heartbeat` every [`HEARTBEAT_EVERY`].
pub async fn watch_pool_nodes(
    client: &kube::Client,
    heartbeat: &impl Heartbeat,
    listings: &ListingCache<PoolNode>,
    memory: &WatchMemory,
    input: &Since<WatchPoolNodes>,
) -> Result<Listing<PoolNode>> {
    let since = input.since.as_deref();
    let nodes = match watch_until_changed(client, heartbeat, memory, &input.of, since).await? {
        Looked::Changed(nodes) | Looked::Unchanged(nodes) => nodes,
    };
    Ok(answer(listings, since, nodes))
}

/// The answer for `nodes` to a workflow holding the list of digest `since`: "unchanged" when
/// `nodes` is that list, else as `kube.list_pool_nodes_since` answers. `nodes` is kept in
/// `listings` either way, for the next look.
pub fn answer(
    listings: &ListingCache<PoolNode>,
    since: Option<&str>,
    nodes: Vec<PoolNode>,
) -> Listing<PoolNode> {
    let listing = listings.answer(since, nodes);
    match since {
        Some(held) if listing.digest == held => unchanged(held),
        _ => listing,
    }
}

/// The answer "nothing changed since the list of digest `held`": that digest as base and as
/// digest, no items and nothing removed (`model::listing::apply` gives back the list held).
pub fn unchanged(held: &str) -> Listing<PoolNode> {
    Listing {
        digest: held.to_owned(),
        base: Some(held.to_owned()),
        items: Vec::new(),
        removed: Vec::new(),
    }
}

/// What a watch saw.
enum Looked {
    /// A list other than the one held.
    Changed(Vec<PoolNode>),
    /// The list held, through the whole wait.
    Unchanged(Vec<PoolNode>),
}

/// Steps 1 to 4 of the module doc.
async fn watch_until_changed(
    client: &kube::Client,
    heartbeat: &impl Heartbeat,
    memory: &WatchMemory,
    input: &WatchPoolNodes,
    since: Option<&str>,
) -> Result<Looked> {
    heartbeat.beat().await;
    let wait_ends = tokio::time::Instant::now() + Duration::from_secs(input.max_wait_secs);
    let mut view = PoolView::new(input.lease_timeout_secs);
    let mut awaited = Awaited::new(since);
    let node_scope = Scope {
        api: Api::<Node>::all(client.clone()),
        labels: Some(pool_selector(&input.pool)),
    };
    let lease_scope = Scope {
        api: Api::<Lease>::namespaced(client.clone(), NODE_LEASE_NAMESPACE),
        labels: None,
    };
    let starts = resume::starts(
        memory,
        &node_scope.key(),
        &lease_scope.key(),
        input.lease_timeout_secs,
        since,
        std::time::Instant::now(),
        now(),
    );
    let mut node_changes = std::pin::pin!(changes(node_scope, starts.nodes, &memory.nodes));
    let mut lease_changes = std::pin::pin!(changes(lease_scope, starts.leases, &memory.leases));
    let watch_leases = input.lease_timeout_secs.is_some();
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::now() + HEARTBEAT_EVERY,
        HEARTBEAT_EVERY,
    );
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let may_have_changed = tokio::select! {
            change = node_changes.next() => on_node(&mut view, change, &input.pool)?,
            change = lease_changes.next(), if watch_leases => on_lease(&mut view, change)?,
            _ = ticks.tick() => {
                heartbeat.beat().await;
                watch_leases
            }
            () = tokio::time::sleep_until(wait_ends), if view.is_complete() => {
                return Ok(match awaited.unchanged() {
                    Some(held) => Looked::Unchanged(held),
                    // Never: a complete view was looked at. Answer what it is.
                    None => Looked::Changed(view.projected(now())),
                });
            }
        };
        if !(may_have_changed && view.is_complete()) {
            continue;
        }
        // The changes that already arrived are applied before the list is looked at, so that
        // a burst (a resumed watch replays every event since its version at once) answers as
        // one list rather than as the first of its steps.
        for _ in 0..ARRIVED_AT_MOST {
            if let Some(change) = node_changes.next().now_or_never() {
                on_node(&mut view, change, &input.pool)?;
            } else if watch_leases && let Some(change) = lease_changes.next().now_or_never() {
                on_lease(&mut view, change)?;
            } else {
                break;
            }
        }
        if let Some(nodes) = awaited.answer(view.projected(now())) {
            return Ok(Looked::Changed(nodes));
        }
    }
}

/// How many changes that already arrived are applied at most before a list is looked at.
const ARRIVED_AT_MOST: usize = 1000;

/// Applies a change of the pool's Nodes; whether the pool's list may have changed.
fn on_node(
    view: &mut PoolView,
    change: Option<std::result::Result<Change<Node>, FeedError>>,
    pool: &str,
) -> Result<bool> {
    let failed = |source| match source {
        FeedError::List(source) => Error::ListPoolNodes {
            pool: pool.to_owned(),
            source,
        },
        FeedError::Watch(source) => Error::WatchPoolNodes {
            pool: pool.to_owned(),
            source,
        },
    };
    match change {
        Some(Ok(Change::Listed(nodes))) => view.list_nodes(&nodes),
        Some(Ok(Change::Applied(node))) => view.apply_node(&node),
        Some(Ok(Change::Deleted(node))) => view.delete_node(&node),
        Some(Err(error)) => return Err(failed(error)),
        // The feed ends only after an error, returned above.
        None => return Ok(false),
    }
    Ok(true)
}

/// Applies a change of the Node Leases; whether the pool's list may have changed.
fn on_lease(
    view: &mut PoolView,
    change: Option<std::result::Result<Change<Lease>, FeedError>>,
) -> Result<bool> {
    Ok(match change {
        Some(Ok(Change::Listed(leases))) => {
            view.list_leases(&leases);
            true
        }
        Some(Ok(Change::Applied(lease))) => view.apply_lease(&lease),
        Some(Ok(Change::Deleted(lease))) => view.delete_lease(&lease),
        Some(Err(FeedError::List(source))) => return Err(Error::ListNodeLeases(source)),
        Some(Err(FeedError::Watch(source))) => return Err(Error::WatchNodeLeases(source)),
        None => false,
    })
}

/// Now, Unix seconds.
fn now() -> i64 {
    Utc::now().timestamp()
}

#[cfg(test)]
mod tests {
    use nodewright_model::listing::{apply, digest};

    use super::*;

    fn pool_node(name: &str, ready: bool) -> PoolNode {
        PoolNode {
            name: name.to_owned(),
            provider_id: format!("azure:///x/{name}"),
            ready,
            ready_since: 1_767_323_045,
            draining: false,
            tainted_outdated: false,
            drain_stamp: None,
            conditions: Vec::new(),
            delete_priority: None,
            lease_stale_since: None,
        }
    }

    #[test]
    fn an_unchanged_answer_applies_to_the_list_held_and_gives_it_back() {
        let held = vec![pool_node("web-a", true), pool_node("web-b", false)];
        let held_digest = digest(&held);
        let answer = unchanged(&held_digest);
        assert_eq!(answer.base.as_deref(), Some(held_digest.as_str()));
        assert_eq!(answer.digest, held_digest);
        assert!(answer.items.is_empty() && answer.removed.is_empty());
        assert_eq!(
            apply(Some((&held_digest, &held)), answer),
            Ok((held.clone(), held_digest.clone()))
        );
        assert!(
            apply(None, unchanged(&held_digest)).is_err(),
            "a run holding no list cannot take it"
        );
    }

    #[test]
    fn the_list_held_is_answered_unchanged_even_when_this_worker_never_sent_it() {
        let held = vec![pool_node("web-a", true)];
        let held_digest = digest(&held);
        let listings = ListingCache::default();
        assert_eq!(
            answer(&listings, Some(&held_digest), held.clone()),
            unchanged(&held_digest)
        );
        assert_eq!(
            answer(&listings, Some(&held_digest), held.clone()),
            unchanged(&held_digest),
            "and again, now that it is kept"
        );
    }

    #[test]
    fn a_changed_list_is_answered_as_the_changes_since_the_list_held_or_whole() {
        let listings = ListingCache::default();
        let first = answer(&listings, None, vec![pool_node("web-a", true)]);
        assert_eq!(first.base, None);
        let now = vec![pool_node("web-a", false), pool_node("web-b", true)];
        let changed = answer(&listings, Some(&first.digest), now.clone());
        assert_eq!(changed.base.as_deref(), Some(first.digest.as_str()));
        assert_eq!(changed.items, now);
        let (applied, _) = apply(Some((&first.digest, &first.items)), changed).unwrap_or_default();
        assert_eq!(applied, now);
        let elsewhere = answer(&ListingCache::default(), Some(&first.digest), now.clone());
        assert_eq!(elsewhere.base, None, "another worker sends the whole list");
        assert_eq!(elsewhere.items, now);
    }
}
