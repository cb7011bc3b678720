//! DeleteMachine's first look: whether the machine's VM carries this cluster's and this
//! machine's ownership tags, decided before anything is cordoned, drained or deleted.
//!
//! A VM that is not there does not stop the delete: the Node of a machine whose VM is gone is
//! still recognised as ours by its providerID and its `nodewright.io/machine` label (every Node
//! step checks both), and removing that Node is what the delete is for.

use serde::{Deserialize, Serialize};

use crate::ClusterName;
use crate::ownership::{TAG_CLUSTER, TAG_MACHINE};
use crate::text::quoted;

/// What the machine's VM says of its owner: its two ownership tags as found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum VmOwnerTags {
    /// No VM of that name.
    NoVm,
    /// The VM and its `nodewright.io-cluster` and `nodewright.io-machine` tags (absent: `None`),
    /// each at most 256 characters as Azure keeps them.
    Found {
        /// The `nodewright.io-cluster` tag.
        cluster: Option<String>,
        /// The `nodewright.io-machine` tag.
        machine: Option<String>,
    },
}

/// What the delete does after its first look at the VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerVerdict {
    /// The VM is this cluster's machine: go on.
    Ours,
    /// No VM: go on; the Node steps recognise the machine's Node by providerID and label.
    NoVm,
    /// The VM is someone else's: refuse, nothing touched; the reason names the tags found and
    /// expected.
    NotOurs(String),
}

/// Decides from the VM's ownership tags whether the delete of `machine` may cordon, drain and
/// delete: both tags must be exactly this cluster's and this machine's (as a create adopts).
pub fn before_cordon(found: &VmOwnerTags, cluster: &ClusterName, machine: &str) -> OwnerVerdict {
    let VmOwnerTags::Found {
        cluster: found_cluster,
        machine: found_machine,
    } = found
    else {
        return OwnerVerdict::NoVm;
    };
    let cluster_ok = found_cluster.as_deref() == Some(cluster.as_str());
    let machine_ok = found_machine.as_deref() == Some(machine);
    if cluster_ok && machine_ok {
        return OwnerVerdict::Ours;
    }
    let shown =
        |value: &Option<String>| value.as_deref().map_or_else(|| "absent".to_owned(), quoted);
    OwnerVerdict::NotOurs(format!(
        "VM {machine} carries {TAG_CLUSTER}={} and {TAG_MACHINE}={}, expected {TAG_CLUSTER}={} and {TAG_MACHINE}={}: it is not this cluster's machine, so nothing was touched (no cordon, no drain, no delete); if it should be, fix its tags in Azure and delete again",
        shown(found_cluster),
        shown(found_machine),
        quoted(cluster.as_str()),
        quoted(machine),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn prod() -> ClusterName {
        ClusterName::parse("cluster", "prod").unwrap()
    }

    fn found(cluster: Option<&str>, machine: Option<&str>) -> VmOwnerTags {
        VmOwnerTags::Found {
            cluster: cluster.map(str::to_owned),
            machine: machine.map(str::to_owned),
        }
    }

    #[test]
    fn only_both_exact_tags_let_the_delete_touch_anything() {
        let table: [(VmOwnerTags, Option<OwnerVerdict>); 7] = [
            (VmOwnerTags::NoVm, Some(OwnerVerdict::NoVm)),
            (
                found(Some("prod"), Some("web-a1")),
                Some(OwnerVerdict::Ours),
            ),
            (found(Some("other"), Some("web-a1")), None),
            (found(Some("prod"), Some("web-b2")), None),
            (found(None, Some("web-a1")), None),
            (found(Some("prod"), None), None),
            (found(Some("PROD"), Some("web-a1")), None),
        ];
        for (tags, expected) in table {
            let verdict = before_cordon(&tags, &prod(), "web-a1");
            match expected {
                Some(expected) => assert_eq!(verdict, expected, "{tags:?}"),
                None => assert!(matches!(verdict, OwnerVerdict::NotOurs(_)), "{tags:?}"),
            }
        }
    }

    #[test]
    fn a_refusal_names_the_tags_found_and_expected_and_that_nothing_was_touched() {
        let OwnerVerdict::NotOurs(reason) =
            before_cordon(&found(Some("other"), None), &prod(), "web-a1")
        else {
            panic!("a foreign VM must be refused");
        };
        assert_eq!(
            reason,
            r#"VM web-a1 carries nodewright.io-cluster="other" and nodewright.io-machine=absent, expected nodewright.io-cluster="prod" and nodewright.io-machine="web-a1": it is not this cluster's machine, so nothing was touched (no cordon, no drain, no delete); if it should be, fix its tags in Azure and delete again"#
        );
    }

    proptest! {
        #[test]
        fn any_tag_but_the_exact_pair_is_refused(
            cluster in proptest::option::of("[a-zA-Z0-9-]{0,8}"),
            machine in proptest::option::of("[a-z0-9-]{0,8}"),
        ) {
            let exact = cluster.as_deref() == Some("prod") && machine.as_deref() == Some("web-a1");
            let verdict = before_cordon(&VmOwnerTags::Found { cluster, machine }, &prod(), "web-a1");
            prop_assert_eq!(verdict == OwnerVerdict::Ours, exact);
        }
    }
}
