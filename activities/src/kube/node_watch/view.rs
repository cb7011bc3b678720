//! What a watch keeps of a pool (its Nodes as the pool sees them, and when each Node's Lease was
//! last renewed) and when what it keeps answers the workflow: as soon as the list it makes
//! differs from the one the workflow holds.
//!
//! Only the projection is kept (a [`PoolNode`] per Node, a time per Lease), so a Node status
//! heartbeat, which changes no projected field, changes nothing here and never ends a wait.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use nodewright_model::listing::digest;
use nodewright_model::rollout::PoolNode;

use crate::kube::node_lease::{self, Renewals};
use crate::kube::pool::pool_node;

/// The pool's Nodes and the Leases' renewals, as listed and watched.
#[derive(Debug, Default)]
pub(super) struct PoolView {
    /// The lease timeout asked for; none: Leases are not watched.
    lease_timeout_secs: Option<u64>,
    /// The pool's Nodes, by name.
    nodes: BTreeMap<String, PoolNode>,
    /// When each Lease was last renewed (every Lease of the namespace: a Node that joins the
    /// pool later is judged at once).
    renewals: Renewals,
    /// Whether the Nodes have been listed.
    nodes_listed: bool,
    /// Whether the Leases have been listed.
    leases_listed: bool,
}

impl PoolView {
    /// An empty view; `lease_timeout_secs` says whether Leases are watched.
    pub(super) fn new(lease_timeout_secs: Option<u64>) -> Self {
        Self {
            lease_timeout_secs,
            ..Self::default()
        }
    }

    /// Whether everything needed has been listed once (the Nodes, and the Leases when asked).
    pub(super) fn is_complete(&self) -> bool {
        self.nodes_listed && (self.leases_listed || self.lease_timeout_secs.is_none())
    }

    /// The Nodes, listed: all there is.
    pub(super) fn list_nodes(&mut self, listed: &[Node]) {
        self.nodes = listed
            .iter()
            .map(pool_node)
            .map(|node| (node.name.clone(), node))
            .collect();
        self.nodes_listed = true;
    }

    /// A Node added or modified (a change of its pool label reaches a label watch as an add or
    /// a delete).
    pub(super) fn apply_node(&mut self, node: &Node) {
        let read = pool_node(node);
        self.nodes.insert(read.name.clone(), read);
    }

    /// A Node deleted (or no longer labelled with the pool).
    pub(super) fn delete_node(&mut self, node: &Node) {
        if let Some(name) = &node.metadata.name {
            self.nodes.remove(name);
        }
    }

    /// The Leases, listed: all there are.
    pub(super) fn list_leases(&mut self, listed: &[Lease]) {
        self.renewals = listed.iter().filter_map(node_lease::renewal).collect();
        self.leases_listed = true;
    }

    /// A Lease added or renewed; whether it is a pool Node's (else the pool's list cannot
    /// have changed).
    pub(super) fn apply_lease(&mut self, lease: &Lease) -> bool {
        match node_lease::renewal(lease) {
            Some((name, renewed)) => {
                let ours = self.nodes.contains_key(&name);
                self.renewals.insert(name, renewed);
                ours
            }
            None => self.delete_lease(lease),
        }
    }

    /// A Lease deleted; whether it was a pool Node's.
    pub(super) fn delete_lease(&mut self, lease: &Lease) -> bool {
        lease.metadata.name.as_ref().is_some_and(|name| {
            self.renewals.remove(name);
            self.nodes.contains_key(name)
        })
    }

    /// The pool's list at `now` (Unix seconds), sorted by name: each Node as read, with
    /// `lease_stale_since` when Leases are watched and its Lease is older than the timeout.
    pub(super) fn projected(&self, now: i64) -> Vec<PoolNode> {
        self.nodes
            .values()
            .map(|node| PoolNode {
                lease_stale_since: self.lease_timeout_secs.and_then(|timeout| {
                    node_lease::stale_since(self.renewals.get(&node.name).copied(), timeout, now)
                }),
                ..node.clone()
            })
            .collect()
    }
}

/// The wait for a list other than the one the workflow holds (`since`, its digest).
#[derive(Debug)]
pub(super) struct Awaited<'a> {
    since: Option<&'a str>,
    /// The last list looked at (its digest is `since`); none before the first.
    last: Option<Vec<PoolNode>>,
}

impl<'a> Awaited<'a> {
    /// A wait for a list other than the one of digest `since` (none: any list answers).
    pub(super) fn new(since: Option<&'a str>) -> Self {
        Self { since, last: None }
    }

    /// Looks at `now_list`: it answers (returned) when its digest differs from `since`; else it
    /// is kept (a list equal to the last one kept is not digested again).
    pub(super) fn answer(&mut self, now_list: Vec<PoolNode>) -> Option<Vec<PoolNode>> {
        if self.last.as_ref() == Some(&now_list) {
            return None;
        }
        if self.since != Some(digest(&now_list).as_str()) {
            return Some(now_list);
        }
        self.last = Some(now_list);
        None
    }

    /// The list last looked at, which the workflow holds; none before the first look.
    pub(super) fn unchanged(self) -> Option<Vec<PoolNode>> {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const NOW: i64 = 1_767_323_045;

    fn node(name: &str, conditions: Value) -> Node {
        serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "nodewright.io/pool": "web" } },
            "spec": { "providerID": format!("azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{name}") },
            "status": { "conditions": conditions },
        }))
        .expect("a Node")
    }

    fn ready(name: &str, heartbeat: &str) -> Node {
        node(
            name,
            json!([
                { "type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
                  "lastHeartbeatTime": heartbeat },
                { "type": "KernelDeadlock", "status": "False",
                  "lastTransitionTime": "2026-01-01T00:00:00Z", "lastHeartbeatTime": heartbeat },
            ]),
        )
    }

    fn deadlocked(name: &str) -> Node {
        node(
            name,
            json!([
                { "type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z" },
                { "type": "KernelDeadlock", "status": "True",
                  "lastTransitionTime": "2026-01-02T00:00:00Z" },
            ]),
        )
    }

    fn lease(name: &str, renewed: i64) -> Lease {
        let at = k8s_openapi::jiff::Timestamp::from_second(renewed).unwrap_or_default();
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "kube-node-lease" },
            "spec": { "holderIdentity": name, "renewTime": at.to_string() },
        }))
        .expect("a Lease")
    }

    fn names(list: &[PoolNode]) -> Vec<&str> {
        list.iter().map(|n| n.name.as_str()).collect()
    }

    #[test]
    fn the_projection_is_the_pool_sorted_by_name_and_follows_adds_and_deletes() {
        let mut view = PoolView::new(None);
        assert!(!view.is_complete(), "nothing listed yet");
        view.list_nodes(&[
            ready("web-b", "2026-01-03T00:00:00Z"),
            ready("web-a", "2026-01-03T00:00:00Z"),
        ]);
        assert!(view.is_complete(), "no Leases asked for");
        assert_eq!(names(&view.projected(NOW)), ["web-a", "web-b"]);
        view.apply_node(&ready("web-c", "2026-01-03T00:00:00Z"));
        view.delete_node(&ready("web-a", "2026-01-03T00:00:00Z"));
        assert_eq!(names(&view.projected(NOW)), ["web-b", "web-c"]);
        view.list_nodes(&[ready("web-z", "2026-01-03T00:00:00Z")]);
        assert_eq!(
            names(&view.projected(NOW)),
            ["web-z"],
            "a list again replaces everything"
        );
    }

    #[test]
    fn with_leases_the_view_is_complete_once_both_are_listed() {
        let mut view = PoolView::new(Some(60));
        view.list_nodes(&[ready("web-a", "2026-01-03T00:00:00Z")]);
        assert!(!view.is_complete());
        view.list_leases(&[]);
        assert!(view.is_complete());
    }

    #[test]
    fn a_stale_lease_shows_once_the_timeout_passes_and_a_renewal_clears_it() {
        let mut view = PoolView::new(Some(60));
        view.list_nodes(&[
            ready("web-a", "2026-01-03T00:00:00Z"),
            ready("web-b", "2026-01-03T00:00:00Z"),
            ready("web-c", "2026-01-03T00:00:00Z"),
        ]);
        view.list_leases(&[
            lease("web-a", NOW - 10),
            lease("web-b", NOW - 50),
            lease("other-node", NOW - 500),
        ]);
        let stale = |view: &PoolView, at: i64| -> Vec<(String, Option<i64>)> {
            view.projected(at)
                .into_iter()
                .map(|n| (n.name, n.lease_stale_since))
                .collect()
        };
        assert_eq!(
            stale(&view, NOW),
            [
                ("web-a".to_owned(), None),
                ("web-b".to_owned(), None),
                ("web-c".to_owned(), None),
            ],
            "fresh Leases, and web-c has none"
        );
        assert_eq!(
            stale(&view, NOW + 20),
            [
                ("web-a".to_owned(), None),
                ("web-b".to_owned(), Some(NOW - 50)),
                ("web-c".to_owned(), None),
            ],
            "web-b's renewal is 70 s old: stale, without any new event"
        );
        assert!(view.apply_lease(&lease("web-b", NOW + 15)), "a pool Node's");
        assert!(
            !view.apply_lease(&lease("other-node", NOW)),
            "not the pool's"
        );
        assert_eq!(stale(&view, NOW + 20)[1], ("web-b".to_owned(), None));
        assert!(view.delete_lease(&lease("web-b", NOW)));
        assert_eq!(
            stale(&view, NOW + 1000)[1],
            ("web-b".to_owned(), None),
            "a Node without a Lease is judged by its conditions"
        );
    }

    #[test]
    fn without_a_lease_timeout_no_node_is_stale() {
        let mut view = PoolView::new(None);
        view.list_nodes(&[ready("web-a", "2026-01-03T00:00:00Z")]);
        view.list_leases(&[lease("web-a", 0)]);
        assert_eq!(view.projected(NOW)[0].lease_stale_since, None);
    }

    #[test]
    fn a_wait_answers_on_a_condition_change_and_not_on_a_heartbeat() {
        let mut view = PoolView::new(None);
        view.list_nodes(&[
            ready("web-a", "2026-01-03T00:00:00Z"),
            ready("web-b", "2026-01-03T00:00:00Z"),
        ]);
        let held = view.projected(NOW);
        let held_digest = digest(&held);
        let mut awaited = Awaited::new(Some(&held_digest));
        assert_eq!(awaited.answer(view.projected(NOW)), None, "as held");

        view.apply_node(&ready("web-a", "2026-01-03T00:00:40Z"));
        assert_eq!(awaited.answer(view.projected(NOW)), None, "a heartbeat");

        view.apply_node(&deadlocked("web-a"));
        let answered = awaited.answer(view.projected(NOW));
        let deadlock = answered
            .as_deref()
            .and_then(|list| list.first())
            .and_then(|a| a.conditions.iter().find(|c| c.type_ == "KernelDeadlock"))
            .map(|c| c.status.as_str());
        assert_eq!(deadlock, Some("True"), "{answered:?}");
    }

    #[test]
    fn a_wait_answers_at_once_without_a_list_held_or_with_another() {
        let mut view = PoolView::new(None);
        view.list_nodes(&[ready("web-a", "2026-01-03T00:00:00Z")]);
        assert!(Awaited::new(None).answer(view.projected(NOW)).is_some());
        assert!(
            Awaited::new(Some("0123456789abcdef"))
                .answer(view.projected(NOW))
                .is_some()
        );
    }

    #[test]
    fn an_unchanged_wait_gives_back_the_list_held() {
        let mut view = PoolView::new(None);
        view.list_nodes(&[ready("web-a", "2026-01-03T00:00:00Z")]);
        let held = view.projected(NOW);
        let held_digest = digest(&held);
        let mut awaited = Awaited::new(Some(&held_digest));
        assert_eq!(Awaited::new(Some(&held_digest)).unchanged(), None);
        assert_eq!(awaited.answer(view.projected(NOW)), None);
        assert_eq!(awaited.unchanged(), Some(held));
    }
}
