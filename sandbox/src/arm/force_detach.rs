//! `detachOption: ForceDetach` while another operation runs on the VM.
//!
//! In Azure a data disk stuck detaching is released by a VM update that marks it
//! `toBeDetached: true` with `detachOption: ForceDetach` (VM PUT/PATCH of
//! `storageProfile.dataDisks`, or `attachDetachDataDisks` with `dataDisksToDetach[].detachOption`).
//! The emulator accepts such a request even while the VM is busy with the operation that is
//! detaching the disk (say one held by a `hang_detach` rule), instead of answering 409:
//!
//! - a new operation (the force detach) takes the disk over: the disk leaves the detach list of
//!   the operation that held it and is busy with the force detach, which is never held by
//!   `hang_detach` rules and completes after the profile's detach latency;
//! - the operation it was taken from waits for the force detach and ends with it (`Succeeded`,
//!   unless a `fail_operation` rule says otherwise); it is no longer held by its `hang_detach`
//!   rule once it has no disk left to detach, so the VM is no longer busy afterwards;
//! - the VM stays busy with that operation meanwhile, so other requests still get 409.
//!
//! A disk already being force-detached is not detached twice: the request gets the running force
//! detach. A force detach is refused (409 `AnotherOperationInProgress`) when the VM is busy with
//! something other than an update (create, delete, power action), when a forced disk is being
//! attached, or when the request changes anything besides marking disks force-detached.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::data_disks::{entries_of, entry_disk, force_detached, to_be_detached};
use super::engine::{Core, OpSpec};
use super::error::ArmError;
use super::state::{Action, OpStatus, Operation, key, obj_at};

/// What happens to one disk a busy-VM force detach names.
enum Plan {
    /// Attached and idle, or being detached by `from` (an operation in progress): detach it now.
    Start { from: Option<String> },
    /// Already being force-detached by this operation.
    Running(String),
}

/// The disks `requested` (the VM's new data-disk list) force-detaches, when that is all it
/// changes compared with `current` (the stored list): every disk that is not force-detached keeps
/// its state (attached, or being detached). `None` when the list asks for no force detach, or for
/// something else too (a new disk, a disk dropped without being detached yet).
pub fn only_force_detaches(current: &[Value], requested: &[Value]) -> Option<Vec<String>> {
    let forced = force_detached(requested);
    if forced.is_empty() {
        return None;
    }
    let forced_keys: BTreeSet<String> = forced.iter().map(|d| key(d)).collect();
    let active = |entries: &[Value]| -> BTreeSet<String> {
        entries
            .iter()
            .filter(|e| !to_be_detached(e))
            .filter_map(entry_disk)
            .map(key)
            .filter(|d| !forced_keys.contains(d))
            .collect()
    };
    (active(current) == active(requested)).then_some(forced)
}

/// Starts a force detach of `forced` (disk ids) from the VM `spec.resource`, which is busy with
/// another operation. Disks not attached to the VM are ignored; when nothing is left to do the
/// VM is busy (409). `spec` describes the request; its disk lists are filled in here.
pub fn start_while_busy(
    core: &mut Core,
    mut spec: OpSpec<'_>,
    forced: &[String],
    now: DateTime<Utc>,
) -> Result<Operation, ArmError> {
    let vm_id = spec.resource.clone();
    let vm = core
        .state
        .get(&vm_id)
        .cloned()
        .ok_or_else(|| ArmError::ResourceNotFound(vm_id.clone()))?;
    let busy_with = vm
        .busy
        .as_ref()
        .and_then(|id| core.state.operations.get(id))
        .filter(|op| op.status == OpStatus::InProgress)
        .cloned();
    if busy_with
        .as_ref()
        .is_some_and(|op| op.action != Action::Update)
    {
        return Err(ArmError::Busy(vm.id().to_owned()));
    }
    let listed: BTreeSet<String> = entries_of(&vm.body)
        .iter()
        .filter_map(entry_disk)
        .map(key)
        .collect();
    let mut plans: Vec<(String, Plan)> = Vec::new();
    for disk_id in forced {
        if !listed.contains(&key(disk_id)) || plans.iter().any(|(d, _)| key(d) == key(disk_id)) {
            continue;
        }
        let Some(disk) = core.state.get(disk_id) else {
            continue;
        };
        let attached_here = disk.body["managedBy"]
            .as_str()
            .is_some_and(|m| key(m) == key(&vm_id));
        if !attached_here {
            continue;
        }
        let holder = disk
            .busy
            .as_ref()
            .and_then(|id| core.state.operations.get(id))
            .filter(|op| op.status == OpStatus::InProgress);
        let has = |list: &[String]| list.iter().any(|d| key(d) == key(disk_id));
        let plan = match holder {
            None => Plan::Start { from: None },
            Some(op) if has(&op.force_detach) => Plan::Running(op.id.clone()),
            Some(op) if has(&op.detach) && key(&op.resource) == key(&vm_id) => Plan::Start {
                from: Some(op.id.clone()),
            },
            Some(_) => return Err(ArmError::Busy(disk.id().to_owned())),
        };
        plans.push((disk.id().to_owned(), plan));
    }
    let start: Vec<(String, Option<String>)> = plans
        .iter()
        .filter_map(|(disk, plan)| match plan {
            Plan::Start { from } => Some((disk.clone(), from.clone())),
            Plan::Running(_) => None,
        })
        .collect();
    if start.is_empty() {
        let running = plans.iter().find_map(|(_, plan)| match plan {
            Plan::Running(op) => core.state.operations.get(op).cloned(),
            Plan::Start { .. } => None,
        });
        return running.ok_or_else(|| ArmError::Busy(vm.id().to_owned()));
    }
    let disks: Vec<String> = start.iter().map(|(disk, _)| disk.clone()).collect();
    spec.attach = Vec::new();
    spec.detach = disks.clone();
    spec.force_detach = disks.clone();
    spec.created = Vec::new();
    let op = core.begin(spec, now);
    // The VM stays busy with the operation in progress; the disks are the force detach's.
    if let Some(r) = core.state.get_mut(&vm_id) {
        r.busy = busy_with.as_ref().map(|o| o.id.clone()).or(r.busy.take());
        let list = obj_at(&mut r.body["properties"], "storageProfile");
        if let Some(Value::Array(entries)) = list.get_mut("dataDisks") {
            for entry in entries
                .iter_mut()
                .filter(|e| entry_disk(e).is_some_and(|d| disks.iter().any(|f| key(f) == key(d))))
            {
                entry["toBeDetached"] = json!(true);
                entry["detachOption"] = json!("ForceDetach");
            }
        }
        r.set_provisioning_state("Updating");
    }
    for (disk, from) in &start {
        let Some(held) = from
            .as_ref()
            .and_then(|id| core.state.operations.get_mut(id))
        else {
            continue;
        };
        held.detach.retain(|d| key(d) != key(disk));
        held.force_detach.retain(|d| key(d) != key(disk));
        if !held.waits_for.contains(&op.id) {
            held.waits_for.push(op.id.clone());
        }
        // A `hang_detach` rule holds detaches: with none left, it holds this one no longer.
        if held.detach.is_empty() {
            held.hang_rule = None;
        }
    }
    tracing::debug!(vm = %vm_id, disks = ?disks, op = %op.id, "force detach");
    Ok(op)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(disk: &str, detached: bool, force: bool) -> Value {
        let mut e = json!({"lun": 0, "managedDisk": {"id": disk}});
        if detached {
            e["toBeDetached"] = json!(true);
        }
        if force {
            e["detachOption"] = json!("ForceDetach");
        }
        e
    }

    #[test]
    fn a_list_that_only_force_detaches_is_recognised() {
        let current = [entry("/d/a", true, false), entry("/d/b", false, false)];
        let forced = only_force_detaches(
            &current,
            &[entry("/d/a", true, true), entry("/d/b", false, false)],
        );
        assert_eq!(forced, Some(vec!["/d/a".to_owned()]));
        let active_forced = only_force_detaches(
            &current,
            &[entry("/d/a", true, false), entry("/D/B", true, true)],
        );
        assert_eq!(active_forced, Some(vec!["/D/B".to_owned()]));
        assert_eq!(
            only_force_detaches(&current, &[entry("/d/a", true, false)]),
            None,
            "no force detach asked for"
        );
        assert_eq!(
            only_force_detaches(&current, &[entry("/d/a", true, true)]),
            None,
            "b would be detached normally too"
        );
        assert_eq!(
            only_force_detaches(
                &current,
                &[
                    entry("/d/a", true, true),
                    entry("/d/b", false, false),
                    entry("/d/c", false, false)
                ]
            ),
            None,
            "c would be attached"
        );
    }
}
