//! Whether a look starts its feeds from the states the worker kept ([`WatchMemory`]) or lists.
//!
//! A kept state is an older state of the pool than a list would give, so it is used only when
//! the pool's list it makes is the one the workflow holds (the same digest): then nothing the
//! workflow knows is newer than it, and every change after it comes through the resumed watch,
//! which replays every event after the kept version. Otherwise (nothing held, a state not kept
//! or too old, or a list other than the one held: sent by another worker, or Leases gone stale
//! since they were kept) the look lists, as a first look does. Nodes and Leases resume together
//! or not at all, since the list held is made of both.

use std::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use nodewright_model::listing::digest;

use super::feed::Start;
use super::memory::{Kept, ScopeKey, WatchMemory};
use super::view::PoolView;

/// How the two feeds of a look start.
pub(super) struct Starts {
    /// The pool's Nodes.
    pub nodes: Start<Node>,
    /// The Node Leases (listed only if watched).
    pub leases: Start<Lease>,
}

/// The starts for a look at the Nodes of scope `nodes` (and the Leases of scope `leases` when
/// `lease_timeout_secs` is set) by a workflow holding the list of digest `since`, from what
/// `memory` keeps at `now` (and `now_secs`, Unix seconds, to judge the Leases).
pub(super) fn starts(
    memory: &WatchMemory,
    nodes: &ScopeKey,
    leases: &ScopeKey,
    lease_timeout_secs: Option<u64>,
    since: Option<&str>,
    now: Instant,
    now_secs: i64,
) -> Starts {
    let listed = || Starts {
        nodes: Start::List,
        leases: Start::List,
    };
    let Some(since) = since else {
        return listed();
    };
    let Some(kept_nodes) = memory.nodes.take(nodes, now) else {
        return listed();
    };
    let kept_leases = match lease_timeout_secs {
        Some(_) => match memory.leases.take(leases, now) {
            Some(kept) => Some(kept),
            None => return listed(),
        },
        None => None,
    };
    if !makes_held_list(
        &kept_nodes,
        kept_leases.as_ref(),
        lease_timeout_secs,
        since,
        now_secs,
    ) {
        return listed();
    }
    Starts {
        nodes: Start::Resume(kept_nodes),
        leases: kept_leases.map_or(Start::List, Start::Resume),
    }
}

/// Whether the kept Nodes (and Leases) make, at `now_secs`, the pool's list of digest `since`.
fn makes_held_list(
    nodes: &Kept<Node>,
    leases: Option<&Kept<Lease>>,
    lease_timeout_secs: Option<u64>,
    since: &str,
    now_secs: i64,
) -> bool {
    let mut view = PoolView::new(lease_timeout_secs);
    view.list_nodes(&nodes.objects.values().cloned().collect::<Vec<_>>());
    if let Some(leases) = leases {
        view.list_leases(&leases.objects.values().cloned().collect::<Vec<_>>());
    }
    view.is_complete() && digest(&view.projected(now_secs)) == since
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::json;

    use super::super::memory::MAX_AGE;
    use super::*;

    const NOW: i64 = 1_767_323_045;
    const NODES_URL: &str = "/api/v1/nodes";
    const LEASES_URL: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

    fn node(name: &str, deadlock: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "nodewright.io/pool": "web" } },
            "spec": { "providerID": format!("azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{name}") },
            "status": { "conditions": [
                { "type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z" },
                { "type": "KernelDeadlock", "status": deadlock,
                  "lastTransitionTime": "2026-01-01T00:00:00Z" },
            ] },
        }))
        .expect("a Node")
    }

    fn lease(name: &str, renewed: i64) -> Lease {
        let at = k8s_openapi::jiff::Timestamp::from_second(renewed).unwrap_or_default();
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "kube-node-lease" },
            "spec": { "holderIdentity": name, "renewTime": at.to_string() },
        }))
        .expect("a Lease")
    }

    fn kept<K: kube::Resource>(objects: Vec<K>, seen_at: Instant) -> Kept<K> {
        Kept {
            objects: Arc::new(
                objects
                    .into_iter()
                    .map(|object| {
                        (
                            format!("/{}", object.meta().name.as_deref().unwrap_or_default()),
                            object,
                        )
                    })
                    .collect(),
            ),
            resource_version: "10".to_owned(),
            seen_at,
        }
    }

    /// The digest of the list `nodes` and `leases` make at `now_secs` (what a workflow holds).
    fn held(nodes: &[Node], leases: Option<&[Lease]>, now_secs: i64) -> String {
        let mut view = PoolView::new(leases.map(|_| 60));
        view.list_nodes(nodes);
        if let Some(leases) = leases {
            view.list_leases(leases);
        }
        digest(&view.projected(now_secs))
    }

    struct Case {
        /// What the case is.
        name: &'static str,
        /// The Nodes kept, if any.
        kept_nodes: Option<Vec<Node>>,
        /// The Leases kept, if any.
        kept_leases: Option<Vec<Lease>>,
        /// Whether the look has a lease timeout (60 s).
        leases_watched: bool,
        /// The digest the workflow holds.
        since: Option<String>,
        /// How long ago the states were kept.
        kept_ago: Duration,
        /// Whether the look resumes.
        resumes: bool,
    }

    fn check(case: Case) {
        let memory = WatchMemory::default();
        let now = Instant::now() + MAX_AGE * 2;
        let seen_at = now - case.kept_ago;
        let nodes = ScopeKey::new(NODES_URL, Some("nodewright.io/pool=web"));
        let leases = ScopeKey::new(LEASES_URL, None);
        if let Some(kept_nodes) = case.kept_nodes {
            memory.nodes.store(nodes.clone(), kept(kept_nodes, seen_at));
        }
        if let Some(kept_leases) = case.kept_leases {
            memory
                .leases
                .store(leases.clone(), kept(kept_leases, seen_at));
        }
        let lease_timeout_secs = case.leases_watched.then_some(60);
        let chosen = starts(
            &memory,
            &nodes,
            &leases,
            lease_timeout_secs,
            case.since.as_deref(),
            now,
            NOW,
        );
        let resumed = match (chosen.nodes, chosen.leases, lease_timeout_secs) {
            (Start::Resume(_), Start::Resume(_), Some(_))
            | (Start::Resume(_), Start::List, None) => Some(true),
            (Start::List, Start::List, _) => Some(false),
            // The Nodes and the Leases start apart.
            _ => None,
        };
        assert_eq!(resumed, Some(case.resumes), "{}", case.name);
    }

    #[test]
    fn a_look_resumes_only_from_a_fresh_state_that_makes_the_list_held() {
        let nodes = vec![node("web-a", "False"), node("web-b", "False")];
        let leases = vec![lease("web-a", NOW - 5), lease("web-b", NOW - 5)];
        let held_nodes = held(&nodes, None, NOW);
        let held_both = held(&nodes, Some(&leases), NOW);
        let fresh = Duration::from_secs(30);
        let cases = [
            Case {
                name: "the kept Nodes make the list held: resume",
                kept_nodes: Some(nodes.clone()),
                kept_leases: None,
                leases_watched: false,
                since: Some(held_nodes.clone()),
                kept_ago: fresh,
                resumes: true,
            },
            Case {
                name: "Nodes and Leases kept make the list held: both resume",
                kept_nodes: Some(nodes.clone()),
                kept_leases: Some(leases.clone()),
                leases_watched: true,
                since: Some(held_both.clone()),
                kept_ago: fresh,
                resumes: true,
            },
            Case {
                name: "nothing held: list",
                kept_nodes: Some(nodes.clone()),
                kept_leases: None,
                leases_watched: false,
                since: None,
                kept_ago: fresh,
                resumes: false,
            },
            Case {
                name: "nothing kept: list",
                kept_nodes: None,
                kept_leases: None,
                leases_watched: false,
                since: Some(held_nodes.clone()),
                kept_ago: fresh,
                resumes: false,
            },
            Case {
                name: "kept longer ago than the bound: list",
                kept_nodes: Some(nodes.clone()),
                kept_leases: None,
                leases_watched: false,
                since: Some(held_nodes.clone()),
                kept_ago: MAX_AGE + Duration::from_secs(1),
                resumes: false,
            },
            Case {
                name: "the workflow holds another list (another worker's, newer): list",
                kept_nodes: Some(vec![node("web-a", "True"), node("web-b", "False")]),
                kept_leases: None,
                leases_watched: false,
                since: Some(held_nodes.clone()),
                kept_ago: fresh,
                resumes: false,
            },
            Case {
                name: "Leases watched but none kept: list both",
                kept_nodes: Some(nodes.clone()),
                kept_leases: None,
                leases_watched: true,
                since: Some(held_both.clone()),
                kept_ago: fresh,
                resumes: false,
            },
            Case {
                name: "kept Leases that look stale now (kept renewals too old): list both",
                kept_nodes: Some(nodes.clone()),
                kept_leases: Some(vec![lease("web-a", NOW - 61), lease("web-b", NOW - 5)]),
                leases_watched: true,
                since: Some(held_both.clone()),
                kept_ago: fresh,
                resumes: false,
            },
        ];
        for case in cases {
            check(case);
        }
    }
}
