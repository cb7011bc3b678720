//! The last look before a deletion: the sweep's activities read a planned NIC, OS disk or Node
//! again just before deleting it, and delete it only when it is still an orphan.
//!
//! Minutes (or an approval wait) may pass between the listing and the deletion: a NIC may be
//! attached to a new VM, a disk re-tagged or attached, a Node recreated under the same name or
//! Ready again. Whatever changed keeps the subject; the next sweep decides about it afresh.

use std::collections::BTreeMap;

use super::inventory::{NodeReadiness, NodeRecord};
use crate::ClusterName;
use crate::machine::os_disk_name;
use crate::ownership::{TAG_MACHINE, is_owned_by};

/// Whether a subject read again just before its deletion may still be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recheck {
    /// Still an orphan: delete it.
    Delete,
    /// It changed since it was listed: leave it alone, for this reason.
    LeaveAlone(String),
}

/// A NIC read again: deleted only when it still carries this cluster's tag and is attached to
/// no VM.
pub fn recheck_nic(
    tags: &BTreeMap<String, String>,
    cluster: &ClusterName,
    attached_vm: Option<&str>,
) -> Recheck {
    if !is_owned_by(tags, cluster) {
        Recheck::LeaveAlone("its cluster tag is no longer this cluster's".to_owned())
    } else if let Some(vm) = attached_vm {
        Recheck::LeaveAlone(format!("it is attached to {vm}"))
    } else {
        Recheck::Delete
    }
}

/// A disk named `name` read again: deleted only when it still carries this cluster's tag, is
/// managed by no VM, and is a machine's OS disk as nodewright names and tags it (never a
/// volume).
pub fn recheck_disk(
    name: &str,
    tags: &BTreeMap<String, String>,
    cluster: &ClusterName,
    managed_by: Option<&str>,
) -> Recheck {
    let os_disk = tags
        .get(TAG_MACHINE)
        .is_some_and(|machine| name == os_disk_name(machine));
    if !is_owned_by(tags, cluster) {
        Recheck::LeaveAlone("its cluster tag is no longer this cluster's".to_owned())
    } else if let Some(vm) = managed_by {
        Recheck::LeaveAlone(format!("it is attached to {vm}"))
    } else if !os_disk {
        Recheck::LeaveAlone("it is not a nodewright machine's OS disk".to_owned())
    } else {
        Recheck::Delete
    }
}

/// A Node read again (`now`), listed with uid `listed_uid`: deleted only when it is the same
/// object and still not Ready.
pub fn recheck_node(listed_uid: &str, now: &NodeRecord) -> Recheck {
    if now.uid != listed_uid {
        Recheck::LeaveAlone(format!("Node {} was recreated (uid {})", now.name, now.uid))
    } else if now.readiness == NodeReadiness::Ready {
        Recheck::LeaveAlone(format!("Node {} is Ready again", now.name))
    } else {
        Recheck::Delete
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ownership::TAG_CLUSTER;

    fn cluster() -> ClusterName {
        ClusterName::parse("cluster", "prod").expect("a valid cluster name")
    }

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_nic_is_deleted_only_while_ours_and_detached() {
        let ours = tags(&[(TAG_CLUSTER, "prod")]);
        let theirs = tags(&[(TAG_CLUSTER, "staging")]);
        let table = [
            ("ours, detached", &ours, None, Recheck::Delete),
            (
                "ours, attached again",
                &ours,
                Some("web-new"),
                Recheck::LeaveAlone("it is attached to web-new".to_owned()),
            ),
            (
                "re-tagged",
                &theirs,
                None,
                Recheck::LeaveAlone("its cluster tag is no longer this cluster's".to_owned()),
            ),
        ];
        for (case, tags, attached, expected) in table {
            assert_eq!(recheck_nic(tags, &cluster(), attached), expected, "{case}");
        }
    }

    #[test]
    fn a_disk_is_deleted_only_while_an_unattached_os_disk_of_ours() {
        let os_disk = os_disk_name("web-abc12");
        let ours = tags(&[(TAG_CLUSTER, "prod"), (TAG_MACHINE, "web-abc12")]);
        let untagged_machine = tags(&[(TAG_CLUSTER, "prod")]);
        let theirs = tags(&[(TAG_CLUSTER, "staging"), (TAG_MACHINE, "web-abc12")]);
        let table = [
            (
                "our OS disk, unattached",
                os_disk.as_str(),
                &ours,
                None,
                true,
            ),
            (
                "attached",
                os_disk.as_str(),
                &ours,
                Some("web-abc12"),
                false,
            ),
            ("re-tagged", os_disk.as_str(), &theirs, None, false),
            ("a volume's name", "pvc-1234", &ours, None, false),
            (
                "no machine tag",
                os_disk.as_str(),
                &untagged_machine,
                None,
                false,
            ),
        ];
        for (case, name, tags, managed_by, deleted) in table {
            let recheck = recheck_disk(name, tags, &cluster(), managed_by);
            assert_eq!(recheck == Recheck::Delete, deleted, "{case}: {recheck:?}");
        }
    }

    fn node(uid: &str, readiness: NodeReadiness) -> NodeRecord {
        NodeRecord {
            name: "web-abc12".to_owned(),
            uid: uid.to_owned(),
            provider_id: None,
            machine: None,
            pool: None,
            created_at: 0,
            readiness,
            tainted_outdated: false,
        }
    }

    #[test]
    fn a_node_is_deleted_only_while_the_same_object_and_not_ready() {
        let not_ready = NodeReadiness::NotReady {
            since: 0,
            last_heartbeat: 0,
        };
        let table = [
            ("same, NotReady", node("u1", not_ready), Recheck::Delete),
            (
                "recreated",
                node("u2", not_ready),
                Recheck::LeaveAlone("Node web-abc12 was recreated (uid u2)".to_owned()),
            ),
            (
                "Ready again",
                node("u1", NodeReadiness::Ready),
                Recheck::LeaveAlone("Node web-abc12 is Ready again".to_owned()),
            ),
        ];
        for (case, now, expected) in table {
            assert_eq!(recheck_node("u1", &now), expected, "{case}");
        }
    }

    proptest! {
        #[test]
        fn nothing_without_this_clusters_tag_is_ever_deleted(
            cluster_tag in proptest::option::of("[a-z]{1,8}"),
            machine_tag in proptest::option::of("[a-z]{1,8}"),
            name in "[a-z-]{1,20}",
            attached in proptest::option::of("[a-z]{1,8}"),
        ) {
            let mut tags = BTreeMap::new();
            if let Some(tag) = &cluster_tag {
                tags.insert(TAG_CLUSTER.to_owned(), tag.clone());
            }
            if let Some(machine) = &machine_tag {
                tags.insert(TAG_MACHINE.to_owned(), machine.clone());
            }
            let ours = cluster_tag.as_deref() == Some("prod");
            let nic = recheck_nic(&tags, &cluster(), attached.as_deref());
            let disk = recheck_disk(&name, &tags, &cluster(), attached.as_deref());
            prop_assert_eq!(nic == Recheck::Delete, ours && attached.is_none());
            if disk == Recheck::Delete {
                prop_assert!(ours && attached.is_none());
                prop_assert_eq!(Some(name), machine_tag.as_deref().map(os_disk_name));
            }
        }
    }
}
