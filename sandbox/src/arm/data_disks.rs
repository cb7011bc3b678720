//! Data disks on a VM: validating a new `storageProfile.dataDisks` list against the old one
//! (what it attaches and detaches), reserving the disks, and settling them when the operation
//! completes. Shared by VM PUT/PATCH, `attachDetachDataDisks` and the `Compute` seam.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::error::ArmError;
use super::state::{Operation, State, key, name_of, obj_at};

/// Highest LUN Azure allows.
const MAX_LUN: u64 = 63;

/// What a new data-disk list does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskPlan {
    /// The list to store (entries being detached keep `toBeDetached: true` until done).
    pub entries: Vec<Value>,
    /// Disk ids (as created) newly attached.
    pub attach: Vec<String>,
    /// Disk ids (as created) being detached.
    pub detach: Vec<String>,
    /// The disks of `detach` whose entry asks for `detachOption: ForceDetach`.
    pub force_detach: Vec<String>,
}

/// The disk id of a data-disk entry.
pub fn entry_disk(entry: &Value) -> Option<&str> {
    entry["managedDisk"]["id"].as_str()
}

/// Whether a data-disk entry is marked `toBeDetached: true`.
pub fn to_be_detached(entry: &Value) -> bool {
    entry["toBeDetached"].as_bool().unwrap_or(false)
}

/// Whether a `detachOption` value is `ForceDetach` (case-insensitive).
pub fn is_force_detach(option: &Value) -> bool {
    option
        .as_str()
        .is_some_and(|o| o.eq_ignore_ascii_case("ForceDetach"))
}

/// The disk ids of the entries marked `toBeDetached: true` with `detachOption: ForceDetach`.
pub fn force_detached(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| to_be_detached(e) && is_force_detach(&e["detachOption"]))
        .filter_map(entry_disk)
        .map(str::to_owned)
        .collect()
}

/// The VM's current data-disk entries.
pub fn entries_of(vm_body: &Value) -> Vec<Value> {
    vm_body["properties"]["storageProfile"]["dataDisks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Validates `new` (the requested list) against `old` (the stored list) for VM `vm_id`.
pub fn plan(
    state: &State,
    vm_id: &str,
    old: &[Value],
    new: Vec<Value>,
) -> Result<DiskPlan, ArmError> {
    let old_active: BTreeSet<String> = old
        .iter()
        .filter(|e| !to_be_detached(e))
        .filter_map(entry_disk)
        .map(key)
        .collect();
    let mut entries = Vec::new();
    let mut active = BTreeSet::new();
    let mut attach = Vec::new();
    let mut used_luns = BTreeSet::new();
    for (i, mut entry) in new.into_iter().enumerate() {
        let target = format!("properties.storageProfile.dataDisks[{i}]");
        if !entry.is_object() {
            return Err(ArmError::invalid(&target, "a data disk must be an object"));
        }
        let disk_id = entry_disk(&entry)
            .ok_or_else(|| {
                ArmError::invalid(
                    &format!("{target}.managedDisk.id"),
                    "managedDisk.id is required",
                )
            })?
            .to_owned();
        let disk_key = key(&disk_id);
        if to_be_detached(&entry) {
            if old_active.contains(&disk_key) {
                entries.push(entry);
            }
            continue;
        }
        if !active.insert(disk_key.clone()) {
            return Err(ArmError::invalid(
                &target,
                format!("disk {disk_id} is listed twice"),
            ));
        }
        let disk = state
            .get(&disk_id)
            .ok_or_else(|| ArmError::ResourceNotFound(disk_id.clone()))?;
        if !old_active.contains(&disk_key) {
            let create = entry["createOption"].as_str().unwrap_or("Attach");
            if !create.eq_ignore_ascii_case("attach") {
                return Err(ArmError::invalid(
                    &format!("{target}.createOption"),
                    format!(
                        "createOption '{create}' is not supported by the emulator; create the disk and use Attach"
                    ),
                ));
            }
            check_attachable(state, vm_id, &disk_id)?;
            attach.push(disk.id().to_owned());
        }
        let object = obj_at(&mut entry, "managedDisk");
        object.insert("id".into(), json!(disk.id()));
        let entry_obj = entry
            .as_object_mut()
            .ok_or_else(|| ArmError::invalid(&target, "not an object"))?;
        entry_obj
            .entry("name")
            .or_insert_with(|| json!(disk.name()));
        entry_obj
            .entry("createOption")
            .or_insert_with(|| json!("Attach"));
        entry_obj
            .entry("deleteOption")
            .or_insert_with(|| json!("Detach"));
        entry_obj.entry("caching").or_insert_with(|| json!("None"));
        if let Some(size) = disk.body["properties"]["diskSizeGB"].as_u64() {
            entry_obj.entry("diskSizeGB").or_insert_with(|| json!(size));
        }
        if let Some(lun) = entry_obj.get("lun") {
            let lun = lun.as_u64().filter(|l| *l <= MAX_LUN).ok_or_else(|| {
                ArmError::invalid(&format!("{target}.lun"), "lun must be an integer 0..=63")
            })?;
            if !used_luns.insert(lun) {
                return Err(ArmError::invalid(
                    &format!("{target}.lun"),
                    format!("lun {lun} is used twice"),
                ));
            }
        }
        entries.push(entry);
    }
    // Assign free LUNs to entries without one.
    for entry in entries.iter_mut().filter(|e| !to_be_detached(e)) {
        if entry.get("lun").is_none() {
            let lun = (0..=MAX_LUN)
                .find(|l| !used_luns.contains(l))
                .ok_or_else(|| {
                    ArmError::invalid("properties.storageProfile.dataDisks", "no free lun")
                })?;
            used_luns.insert(lun);
            entry["lun"] = json!(lun);
        }
    }
    let mut detach = Vec::new();
    for old_entry in old.iter().filter(|e| !to_be_detached(e)) {
        let Some(id) = entry_disk(old_entry) else {
            continue;
        };
        if !active.contains(&key(id)) {
            detach.push(id.to_owned());
            if !entries
                .iter()
                .any(|e| entry_disk(e).is_some_and(|d| key(d) == key(id)))
            {
                let mut gone = old_entry.clone();
                gone["toBeDetached"] = json!(true);
                entries.push(gone);
            }
        }
    }
    let forced: BTreeSet<String> = force_detached(&entries).iter().map(|d| key(d)).collect();
    let force_detach = detach
        .iter()
        .filter(|d| forced.contains(&key(d)))
        .cloned()
        .collect();
    Ok(DiskPlan {
        entries,
        attach,
        detach,
        force_detach,
    })
}

/// Refuses to attach a disk that is attached to another VM, being detached, or busy.
pub fn check_attachable(state: &State, vm_id: &str, disk_id: &str) -> Result<(), ArmError> {
    let disk = state
        .get(disk_id)
        .ok_or_else(|| ArmError::ResourceNotFound(disk_id.to_owned()))?;
    if let Some(owner) = disk.body["managedBy"].as_str()
        && key(owner) != key(vm_id)
    {
        let detaching = disk
            .busy
            .as_ref()
            .and_then(|op| state.operations.get(op))
            .is_some_and(|op| op.detach.iter().any(|d| key(d) == key(disk_id)));
        if detaching {
            return Err(ArmError::rejected(
                409,
                "AttachDiskWhileBeingDetached",
                format!(
                    "Cannot attach data disk '{}' to VM '{}' because the disk is currently being detached from VM '{owner}'.",
                    disk.name(),
                    name_of(vm_id)
                ),
            ));
        }
        return Err(ArmError::AttachedElsewhere {
            disk: disk.name().to_owned(),
            managed_by: owner.to_owned(),
        });
    }
    disk.ensure_idle()?;
    Ok(())
}

/// Reserves the disks a plan attaches (`managedBy` = the VM) before its operation starts.
pub fn commit(state: &mut State, vm_id: &str, plan: &DiskPlan) {
    for id in &plan.attach {
        if let Some(disk) = state.get_mut(id)
            && let Some(obj) = disk.body.as_object_mut()
        {
            obj.insert("managedBy".into(), json!(vm_id));
            disk.new_etag();
        }
    }
}

/// Settles the disks of a completed VM operation.
pub fn finish(state: &mut State, op: &Operation, succeeded: bool) {
    let (settled, released): (&[String], &[String]) = if succeeded {
        (&op.attach, &op.detach)
    } else {
        (&[], &op.attach)
    };
    for id in settled {
        if let Some(disk) = state.get_mut(id) {
            super::state::props(&mut disk.body).insert("diskState".into(), json!("Attached"));
            disk.new_etag();
        }
    }
    for id in released {
        release_disk(state, id);
    }
    let gone: BTreeSet<String> = released.iter().map(|d| key(d)).collect();
    let kept: BTreeSet<String> = op.detach.iter().map(|d| key(d)).collect();
    if let Some(vm) = state.get_mut(&op.resource) {
        let storage = obj_at(&mut vm.body["properties"], "storageProfile");
        if let Some(Value::Array(list)) = storage.get_mut("dataDisks") {
            list.retain(|e| !entry_disk(e).is_some_and(|d| gone.contains(&key(d))));
            if !succeeded {
                // The disks this operation failed to detach stay attached; disks another
                // operation is detaching keep their marks.
                list.iter_mut()
                    .filter(|e| entry_disk(e).is_some_and(|d| kept.contains(&key(d))))
                    .filter_map(Value::as_object_mut)
                    .for_each(|e| {
                        e.remove("toBeDetached");
                        e.remove("detachOption");
                    });
            }
        }
    }
}

/// Makes a disk unattached (`managedBy` removed, `diskState: Unattached`).
pub fn release_disk(state: &mut State, id: &str) {
    if let Some(disk) = state.get_mut(id) {
        if let Some(obj) = disk.body.as_object_mut() {
            obj.remove("managedBy");
        }
        super::state::props(&mut disk.body).insert("diskState".into(), json!("Unattached"));
        disk.new_etag();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arm::state::{Kind, Resource, resource_id};

    fn state_with_disks(names: &[&str]) -> State {
        let mut state = State::default();
        for name in names {
            let id = resource_id("s", "rg", Kind::Disk, name);
            let body = json!({"id": id, "name": name, "properties": {"diskSizeGB": 8, "diskState": "Unattached"}});
            state
                .resources
                .insert(key(&id), Resource::new(Kind::Disk, body));
        }
        state
    }

    fn entry(name: &str) -> Value {
        json!({"createOption": "Attach", "managedDisk": {"id": resource_id("s", "rg", Kind::Disk, name)}})
    }

    #[test]
    fn new_entries_attach_and_missing_ones_detach_with_free_luns() {
        let state = state_with_disks(&["a", "b", "c"]);
        let vm = resource_id("s", "rg", Kind::Vm, "vm");
        let first = plan(&state, &vm, &[], vec![entry("a"), entry("b")]).unwrap();
        assert_eq!(first.attach.len(), 2);
        assert_eq!(first.entries[0]["lun"], 0);
        assert_eq!(first.entries[1]["lun"], 1);
        let second = plan(
            &state,
            &vm,
            &first.entries,
            vec![first.entries[1].clone(), entry("c")],
        )
        .unwrap();
        assert_eq!(second.attach, vec![resource_id("s", "rg", Kind::Disk, "c")]);
        assert_eq!(second.detach, vec![resource_id("s", "rg", Kind::Disk, "a")]);
        assert_eq!(second.entries[1]["lun"], 0, "c takes the lun a frees");
    }

    #[test]
    fn duplicate_luns_and_unknown_disks_are_refused() {
        let state = state_with_disks(&["a", "b"]);
        let vm = resource_id("s", "rg", Kind::Vm, "vm");
        let mut a = entry("a");
        a["lun"] = json!(3);
        let mut b = entry("b");
        b["lun"] = json!(3);
        assert!(matches!(
            plan(&state, &vm, &[], vec![a, b]),
            Err(ArmError::InvalidParameter { .. })
        ));
        assert!(matches!(
            plan(&state, &vm, &[], vec![entry("zz")]),
            Err(ArmError::ResourceNotFound(_))
        ));
    }
}
