//! What a machine's removal (DeleteMachine, a create's compensation) may delete of what its VM
//! left: the OS disk `<machine>-osdisk`, found by its name and judged by its tags or by the VM
//! it was seen under.
//!
//! A create tags its OS disk after the VM provisioned; when that tagging fails the disk carries
//! no tag of this cluster. It is still the machine's when it was seen attached (`managedBy`) to
//! the machine's VM while that VM carried this cluster's tag: nothing else puts a disk of that
//! name under it. A disk of that name that carries another cluster's or machine's tag, or no tag
//! and was not seen under the VM, is never touched (`crate::ownership`'s rule).

use std::collections::BTreeMap;

use super::os_disk_name;
use crate::ClusterName;
use crate::ownership::{TAG_CLUSTER, TAG_MACHINE, is_owned_by};

/// Whether a disk read just before its deletion is deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftoverDisk {
    /// The machine's OS disk, unattached: delete it.
    Delete,
    /// Leave it alone, for this reason.
    LeaveAlone(String),
}

/// What a removal does with the disk `name` it read, with `tags`, attached to `managed_by`:
/// deleted only when it is `machine`'s OS disk by name, attached to nothing, and either carries
/// this cluster's tag and the machine's, or carries no cluster tag and `under_owned_vm` (it was
/// seen attached to the machine's VM while that VM carried this cluster's tag).
pub fn decide_leftover_os_disk(
    machine: &str,
    name: &str,
    tags: &BTreeMap<String, String>,
    cluster: &ClusterName,
    managed_by: Option<&str>,
    under_owned_vm: bool,
) -> LeftoverDisk {
    if name != os_disk_name(machine) {
        return LeftoverDisk::LeaveAlone(format!("{name} is not machine {machine}'s OS disk"));
    }
    if let Some(vm) = managed_by {
        return LeftoverDisk::LeaveAlone(format!("it is attached to {vm}"));
    }
    let tagged_machine = tags.get(TAG_MACHINE).map(String::as_str);
    if is_owned_by(tags, cluster) {
        return match tagged_machine {
            Some(tagged) if tagged == machine => LeftoverDisk::Delete,
            Some(other) => LeftoverDisk::LeaveAlone(format!("it is tagged as machine {other}'s")),
            None if under_owned_vm => LeftoverDisk::Delete,
            None => LeftoverDisk::LeaveAlone(
                "it carries no machine tag and was not seen under this machine's VM".to_owned(),
            ),
        };
    }
    if tags.contains_key(TAG_CLUSTER) {
        return LeftoverDisk::LeaveAlone(crate::ownership::cluster_tag_mismatch(
            tags.get(TAG_CLUSTER).map(String::as_str),
            cluster.as_str(),
        ));
    }
    match (under_owned_vm, tagged_machine) {
        (true, None) => LeftoverDisk::Delete,
        (true, Some(tagged)) if tagged == machine => LeftoverDisk::Delete,
        (true, Some(other)) => {
            LeftoverDisk::LeaveAlone(format!("it is tagged as machine {other}'s"))
        }
        (false, _) => LeftoverDisk::LeaveAlone(
            "it carries no tag of this cluster and was not seen under this machine's VM".to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A case: its name, the disk's name, its tags, `managedBy`, seen under the owned VM,
    /// deleted.
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a [(&'a str, &'a str)],
        Option<&'a str>,
        bool,
        bool,
    );

    #[test]
    fn only_the_machines_os_disk_goes_by_its_tags_or_the_vm_it_was_under() {
        let cluster = ClusterName::parse("cluster", "prod").expect("a valid cluster name");
        let ours: &[(&str, &str)] = &[(TAG_CLUSTER, "prod"), (TAG_MACHINE, "web-abc12")];
        let table: [Case; 12] = [
            ("tagged, free", "web-abc12-osdisk", ours, None, false, true),
            (
                "tagged, free, under the VM",
                "web-abc12-osdisk",
                ours,
                None,
                true,
                true,
            ),
            (
                "tagged but attached",
                "web-abc12-osdisk",
                ours,
                Some("/subscriptions/s/x/vm"),
                true,
                false,
            ),
            (
                "untagged, seen under the VM",
                "web-abc12-osdisk",
                &[],
                None,
                true,
                true,
            ),
            (
                "untagged, never seen under the VM",
                "web-abc12-osdisk",
                &[],
                None,
                false,
                false,
            ),
            (
                "someone's tags only, under the VM",
                "web-abc12-osdisk",
                &[("team", "x")],
                None,
                true,
                true,
            ),
            (
                "another cluster's, under the VM",
                "web-abc12-osdisk",
                &[(TAG_CLUSTER, "staging"), (TAG_MACHINE, "web-abc12")],
                None,
                true,
                false,
            ),
            (
                "another machine's",
                "web-abc12-osdisk",
                &[(TAG_CLUSTER, "prod"), (TAG_MACHINE, "web-zzz99")],
                None,
                true,
                false,
            ),
            (
                "this cluster's without a machine tag, under the VM",
                "web-abc12-osdisk",
                &[(TAG_CLUSTER, "prod")],
                None,
                true,
                true,
            ),
            (
                "this cluster's without a machine tag, not seen",
                "web-abc12-osdisk",
                &[(TAG_CLUSTER, "prod")],
                None,
                false,
                false,
            ),
            (
                "another name, tagged",
                "web-abc12-data",
                ours,
                None,
                true,
                false,
            ),
            ("another name, untagged", "pvc-123", &[], None, true, false),
        ];
        for (case, name, pairs, managed_by, under, deleted) in table {
            let tags = pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            let decided =
                decide_leftover_os_disk("web-abc12", name, &tags, &cluster, managed_by, under);
            assert_eq!(
                decided == LeftoverDisk::Delete,
                deleted,
                "{case}: {decided:?}"
            );
        }
    }
}
