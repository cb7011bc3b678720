//! Merging tags into a machine's VM, NIC and OS disk after the fact: what a failed create that
//! keeps its machine writes (the kept marker and the create's end), so that the orphan sweep
//! leaves the machine alone.

use std::collections::BTreeMap;

use nodewright_model::arm::poll_schedule::OperationKind;
use nodewright_model::machine::{nic_name, os_disk_name};
use nodewright_model::ownership::TAG_DRAIN;
use serde_json::json;

use super::{
    DrainRetagged, MachineError, MachineTagged, RetagDrain, SHORT_OPERATION_WAIT, TagMachine,
    check_owned, is_gone,
};
use crate::azure::ArmClient;

/// What one resource's read found.
enum Found {
    /// It carries the tags asked for already.
    Tagged,
    /// It is this cluster's machine's, and its tags merged with the ones asked for are these.
    ToTag(BTreeMap<String, String>),
    /// Absent.
    Absent,
    /// Not this cluster's machine's.
    NotOurs,
}

/// Merges `input.tags` into the machine's VM and OS disk (PATCH of their tags) and NIC (PUT of
/// the body read, tags merged), each only when it carries this cluster's and the machine's tags and
/// lacks one of the tags asked for.
pub(super) async fn tag_machine(
    client: &ArmClient,
    input: &TagMachine,
) -> Result<MachineTagged, MachineError> {
    let mut result = MachineTagged::default();
    let vm_name = input.machine.clone();
    let vm = match client.get_vm(&vm_name).await {
        Ok(vm) => Some(vm),
        Err(error) if is_gone(&error) => None,
        Err(error) => return Err(error.into()),
    };
    let found = judge("VM", &vm_name, vm.as_ref().map(|vm| &vm.tags), input);
    if let Found::ToTag(tags) = &found {
        let submitted = client.patch_vm(&vm_name, &json!({ "tags": tags })).await?;
        if let Some(operation) = &submitted.operation {
            client
                .wait(operation, OperationKind::VmUpdate, SHORT_OPERATION_WAIT)
                .await?;
        }
    }
    record(&mut result, found, format!("VM {vm_name}"));

    let nic_name = nic_name(&input.machine);
    let nic = match client.get_nic(&nic_name).await {
        Ok(nic) => Some(nic),
        Err(error) if is_gone(&error) => None,
        Err(error) => return Err(error.into()),
    };
    let found = judge(
        "network interface",
        &nic_name,
        nic.as_ref().map(|nic| &nic.tags),
        input,
    );
    if let (Found::ToTag(tags), Some(mut nic)) = (&found, nic) {
        nic.tags = tags.clone();
        let submitted = client.put_nic(&nic_name, &nic).await?;
        if let Some(operation) = &submitted.operation {
            client
                .wait(operation, OperationKind::Nic, SHORT_OPERATION_WAIT)
                .await?;
        }
    }
    record(&mut result, found, format!("NIC {nic_name}"));

    let disk_name = os_disk_name(&input.machine);
    let disk = match client.get_disk(&disk_name).await {
        Ok(disk) => Some(disk),
        Err(error) if is_gone(&error) => None,
        Err(error) => return Err(error.into()),
    };
    let found = judge(
        "disk",
        &disk_name,
        disk.as_ref().map(|disk| &disk.tags),
        input,
    );
    if let Found::ToTag(tags) = &found {
        // PATCH replaces the tags object whole: `tags` holds the disk's own and ours.
        let submitted = client.patch_disk_tags(&disk_name, tags).await?;
        if let Some(operation) = &submitted.operation {
            client
                .wait(operation, OperationKind::Disk, SHORT_OPERATION_WAIT)
                .await?;
        }
    }
    record(&mut result, found, format!("disk {disk_name}"));
    Ok(result)
}

/// Sets each machine's VM's `nodewright.io-drain` tag to `input.value` (one GET, and a PATCH of
/// the tags only when it differs), only on a VM with this cluster's and the machine's tags.
pub(super) async fn retag_drain(
    client: &ArmClient,
    input: &RetagDrain,
) -> Result<DrainRetagged, MachineError> {
    let mut result = DrainRetagged::default();
    for machine in &input.machines {
        let asked = TagMachine {
            cluster: input.cluster.clone(),
            machine: machine.clone(),
            tags: BTreeMap::from([(TAG_DRAIN.to_owned(), input.value.clone())]),
        };
        let vm = match client.get_vm(machine).await {
            Ok(vm) => Some(vm),
            Err(error) if is_gone(&error) => None,
            Err(error) => return Err(error.into()),
        };
        match judge("VM", machine, vm.as_ref().map(|vm| &vm.tags), &asked) {
            Found::ToTag(tags) => {
                let submitted = client.patch_vm(machine, &json!({ "tags": tags })).await?;
                if let Some(operation) = &submitted.operation {
                    client
                        .wait(operation, OperationKind::VmUpdate, SHORT_OPERATION_WAIT)
                        .await?;
                }
                result.tagged.push(machine.clone());
            }
            Found::Tagged => result.tagged.push(machine.clone()),
            Found::Absent => result.absent.push(machine.clone()),
            Found::NotOurs => result.not_ours.push(machine.clone()),
        }
    }
    Ok(result)
}

/// What to do about a resource whose tags are `tags` (`None`: absent).
fn judge(
    kind: &'static str,
    name: &str,
    tags: Option<&BTreeMap<String, String>>,
    input: &TagMachine,
) -> Found {
    let Some(tags) = tags else {
        return Found::Absent;
    };
    if check_owned(kind, name, tags, &input.cluster, &input.machine).is_err() {
        return Found::NotOurs;
    }
    let missing = input
        .tags
        .iter()
        .any(|(name, value)| tags.get(name) != Some(value));
    if !missing {
        return Found::Tagged;
    }
    let mut merged = tags.clone();
    merged.extend(input.tags.clone());
    Found::ToTag(merged)
}

fn record(result: &mut MachineTagged, found: Found, label: String) {
    match found {
        Found::Tagged | Found::ToTag(_) => result.tagged.push(label),
        Found::Absent => result.absent.push(label),
        Found::NotOurs => result.not_ours.push(label),
    }
}

#[cfg(test)]
mod tests {
    use nodewright_model::ClusterName;
    use nodewright_model::ownership::{TAG_CLUSTER, TAG_KEPT, TAG_MACHINE};

    use super::*;

    fn input() -> TagMachine {
        TagMachine {
            cluster: ClusterName::parse("cluster", "prod").unwrap(),
            machine: "web-a1b2c".to_owned(),
            tags: BTreeMap::from([(TAG_KEPT.to_owned(), "t: why".to_owned())]),
        }
    }

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn only_this_clusters_machine_is_tagged_and_only_when_a_tag_is_missing() {
        let ours = tags(&[
            (TAG_CLUSTER, "prod"),
            (TAG_MACHINE, "web-a1b2c"),
            ("team", "x"),
        ]);
        let Found::ToTag(merged) = judge("VM", "web-a1b2c", Some(&ours), &input()) else {
            panic!("ours and unmarked: tagged");
        };
        assert_eq!(merged["team"], "x", "other tags are kept");
        assert_eq!(merged[TAG_KEPT], "t: why");
        assert!(matches!(
            judge("VM", "web-a1b2c", Some(&merged), &input()),
            Found::Tagged
        ));
        let stale = tags(&[
            (TAG_CLUSTER, "prod"),
            (TAG_MACHINE, "web-a1b2c"),
            (TAG_KEPT, "earlier"),
        ]);
        assert!(matches!(
            judge("VM", "web-a1b2c", Some(&stale), &input()),
            Found::ToTag(_)
        ));
        let other = tags(&[(TAG_CLUSTER, "staging"), (TAG_MACHINE, "web-a1b2c")]);
        assert!(matches!(
            judge("VM", "web-a1b2c", Some(&other), &input()),
            Found::NotOurs
        ));
        let other_machine = tags(&[(TAG_CLUSTER, "prod"), (TAG_MACHINE, "web-zzzzz")]);
        assert!(matches!(
            judge("disk", "web-a1b2c-osdisk", Some(&other_machine), &input()),
            Found::NotOurs
        ));
        assert!(matches!(
            judge("VM", "web-a1b2c", None, &input()),
            Found::Absent
        ));
    }

    #[test]
    fn the_summary_names_each_resource() {
        let tagged = MachineTagged {
            tagged: vec!["VM a".to_owned(), "NIC a-nic".to_owned()],
            absent: vec!["disk a-osdisk".to_owned()],
            not_ours: Vec::new(),
        };
        assert_eq!(
            tagged.summary(),
            "VM a, NIC a-nic marked; disk a-osdisk absent"
        );
    }
}
