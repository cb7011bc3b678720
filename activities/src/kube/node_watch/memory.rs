//! What the worker keeps between two looks of a watch: per scope (a collection and its label
//! selector), the objects as a feed last knew them and the `resourceVersion` they are at, so
//! that the next feed of that scope starts from them and watches on from that version instead
//! of listing again ([`super::feed`]).
//!
//! A kept state is a copy: a feed takes one when it starts and stores its own when it ends, so
//! two feeds of one scope running at once each see a whole state, and the last to end is kept.
//! Bounded twice: a state older than [`MAX_AGE`] is not used (the apiserver would most likely
//! answer 410 Gone), and at most [`KEPT_SCOPES`] scopes per kind are kept (the least recently
//! used go first).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;

/// How old a kept `resourceVersion` may be (since the apiserver gave it) and still be watched
/// from. The apiserver compacts etcd's history every 5 minutes by default
/// (`--etcd-compaction-interval`), and its watch cache keeps a resource's events for at least
/// 75 seconds (more while they fit): a version older than that is likely gone, and a watch from
/// it would only be answered 410 Gone and listed after all. 4 minutes stays under the
/// compaction interval; a 410 within it still falls back to a list, so the bound saves requests,
/// correctness does not depend on it.
pub(super) const MAX_AGE: Duration = Duration::from_secs(4 * 60);

/// How many scopes of one kind are kept: one per pool a worker watches (the Leases' scope is
/// one for all pools), a few dozen at most.
pub(super) const KEPT_SCOPES: usize = 32;

/// What the watches of one worker keep: the pools' Nodes and the Node Leases. Shared by every
/// `kube.watch_pool_nodes` of the worker (the activities' struct holds it).
#[derive(Default)]
pub struct WatchMemory {
    /// Nodes, per pool selector.
    pub(super) nodes: FeedMemory<Node>,
    /// Leases of `kube-node-lease` (one scope).
    pub(super) leases: FeedMemory<Lease>,
}

/// Which objects a kept state is of: the collection's URL and the label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ScopeKey(String);

impl ScopeKey {
    /// The scope of the collection at `resource_url` (`Api::resource_url`, which names the
    /// resource and the namespace) selected by `labels`.
    pub(super) fn new(resource_url: &str, labels: Option<&str>) -> Self {
        Self(format!(
            "{resource_url}?labelSelector={}",
            labels.unwrap_or_default()
        ))
    }
}

/// A feed's state: the objects at `resource_version`.
#[derive(Debug, Clone)]
pub(super) struct Kept<K> {
    /// The objects, by namespace and name.
    pub objects: Arc<BTreeMap<String, K>>,
    /// The version the objects are at, which a watch goes on from.
    pub resource_version: String,
    /// When the apiserver gave that version (the list, an event or a bookmark).
    pub seen_at: Instant,
}

/// Kept states of one kind, by scope, the most recently used last.
pub(super) struct FeedMemory<K> {
    states: Mutex<VecDeque<(ScopeKey, Kept<K>)>>,
}

impl<K> Default for FeedMemory<K> {
    fn default() -> Self {
        Self {
            states: Mutex::new(VecDeque::new()),
        }
    }
}

impl<K> FeedMemory<K> {
    /// A copy of the state kept for `scope`, if one is kept whose version is at most
    /// [`MAX_AGE`] old at `now`; an older one is dropped.
    pub(super) fn take(&self, scope: &ScopeKey, now: Instant) -> Option<Kept<K>> {
        let mut states = self.lock();
        let at = states.iter().position(|(key, _)| key == scope)?;
        let (key, kept) = states.remove(at)?;
        if now.saturating_duration_since(kept.seen_at) > MAX_AGE {
            return None;
        }
        let copy = Kept {
            objects: Arc::clone(&kept.objects),
            resource_version: kept.resource_version.clone(),
            seen_at: kept.seen_at,
        };
        states.push_back((key, kept));
        Some(copy)
    }

    /// Keeps `kept` for `scope` (replacing what was kept), dropping the least recently used
    /// scope beyond [`KEPT_SCOPES`].
    pub(super) fn store(&self, scope: ScopeKey, kept: Kept<K>) {
        let mut states = self.lock();
        if let Some(at) = states.iter().position(|(key, _)| *key == scope) {
            states.remove(at);
        }
        while states.len() >= KEPT_SCOPES {
            states.pop_front();
        }
        states.push_back((scope, kept));
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<(ScopeKey, Kept<K>)>> {
        match self.states.lock() {
            Ok(states) => states,
            // A panic while holding the lock left it as it was: each entry is whole (an
            // entry is replaced, never changed in place).
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(names: &[&str], version: &str, seen_at: Instant) -> Kept<String> {
        Kept {
            objects: Arc::new(
                names
                    .iter()
                    .map(|name| ((*name).to_owned(), (*name).to_owned()))
                    .collect(),
            ),
            resource_version: version.to_owned(),
            seen_at,
        }
    }

    fn names(kept: &Kept<String>) -> Vec<&str> {
        kept.objects.keys().map(String::as_str).collect()
    }

    fn scope(pool: &str) -> ScopeKey {
        ScopeKey::new("/api/v1/nodes", Some(&format!("nodewright.io/pool={pool}")))
    }

    #[test]
    fn a_stored_state_is_taken_back_as_stored_and_stays_for_the_next() {
        let memory = FeedMemory::default();
        let now = Instant::now();
        assert!(memory.take(&scope("web"), now).is_none(), "nothing kept");
        memory.store(scope("web"), kept(&["web-a", "web-b"], "10", now));
        for _ in 0..2 {
            let taken = memory.take(&scope("web"), now).expect("kept");
            assert_eq!(names(&taken), ["web-a", "web-b"]);
            assert_eq!(taken.resource_version, "10");
            assert_eq!(taken.seen_at, now);
        }
    }

    #[test]
    fn the_last_state_stored_replaces_the_one_before() {
        let memory = FeedMemory::default();
        let now = Instant::now();
        memory.store(scope("web"), kept(&["web-a"], "10", now));
        memory.store(scope("web"), kept(&["web-b"], "12", now));
        let taken = memory.take(&scope("web"), now).expect("kept");
        assert_eq!(
            (names(&taken), taken.resource_version.as_str()),
            (vec!["web-b"], "12")
        );
    }

    #[test]
    fn a_state_older_than_the_bound_is_not_taken_and_is_dropped() {
        let memory = FeedMemory::default();
        let seen = Instant::now();
        memory.store(scope("web"), kept(&["web-a"], "10", seen));
        assert!(
            memory.take(&scope("web"), seen + MAX_AGE).is_some(),
            "at the bound"
        );
        assert!(
            memory
                .take(&scope("web"), seen + MAX_AGE + Duration::from_secs(1))
                .is_none()
        );
        assert!(memory.take(&scope("web"), seen).is_none(), "dropped");
    }

    #[test]
    fn scopes_are_kept_apart_by_collection_namespace_and_selector() {
        let memory = FeedMemory::default();
        let now = Instant::now();
        let scopes = [
            scope("web"),
            scope("db"),
            ScopeKey::new("/api/v1/nodes", None),
            ScopeKey::new(
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                None,
            ),
            ScopeKey::new("/apis/coordination.k8s.io/v1/namespaces/other/leases", None),
        ];
        for (n, key) in scopes.iter().enumerate() {
            memory.store(key.clone(), kept(&["x"], &n.to_string(), now));
        }
        for (n, key) in scopes.iter().enumerate() {
            let taken = memory.take(key, now).expect("kept");
            assert_eq!(taken.resource_version, n.to_string(), "{key:?}");
        }
    }

    #[test]
    fn beyond_the_bound_the_least_recently_used_scope_goes_first() {
        let memory = FeedMemory::default();
        let now = Instant::now();
        for n in 0..KEPT_SCOPES {
            memory.store(scope(&format!("pool-{n}")), kept(&["x"], "1", now));
        }
        assert!(
            memory.take(&scope("pool-0"), now).is_some(),
            "used: now the newest"
        );
        memory.store(scope("one-more"), kept(&["x"], "1", now));
        assert!(memory.take(&scope("pool-0"), now).is_some());
        assert!(memory.take(&scope("one-more"), now).is_some());
        assert!(
            memory.take(&scope("pool-1"), now).is_none(),
            "the least recently used went"
        );
        let kept_count = (0..KEPT_SCOPES)
            .filter(|n| memory.take(&scope(&format!("pool-{n}")), now).is_some())
            .count();
        assert_eq!(
            kept_count,
            KEPT_SCOPES - 1,
            "pool-0 and the others but pool-1"
        );
    }
}
