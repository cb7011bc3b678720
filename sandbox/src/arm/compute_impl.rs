//! [`crate::compute::Compute`] for [`Emulator`]: the machines view the node joiner reads, and the
//! disk attach/detach the disk attacher performs (operations named `csi.attach`/`csi.detach`,
//! with the profile's latency and the fault rules, making the VM busy as an ARM PATCH would).

use std::time::Duration;

use base64::Engine;
use chrono::Utc;
use serde_json::json;

use super::data_disks::{self, entry_disk};
use super::emulator::Emulator;
use super::engine::{Core, OpSpec};
use super::error::ArmError;
use super::faults::{Concerns, FaultKind, Target};
use super::latency::Step;
use super::state::{Action, Kind, OpStatus, Power, Resource, key, name_of, obj_at};
use crate::compute::{Compute, ComputeError, GuestState, MachineView};

/// How often a waiting attach/detach re-checks even without a change notification.
const RECHECK: Duration = Duration::from_millis(500);

fn guest(vm: &Resource, now: chrono::DateTime<Utc>) -> GuestState {
    match vm.provisioning_state() {
        "Deleting" => return GuestState::Down,
        "Failed" if vm.boot_at.is_none() => return GuestState::Down,
        _ => {}
    }
    match vm.power.unwrap_or(Power::Running) {
        Power::Stopping | Power::Stopped | Power::Deallocating | Power::Deallocated => {
            GuestState::Down
        }
        Power::Starting => GuestState::Booting,
        Power::Running => match vm.boot_at {
            Some(t) if t <= now => GuestState::Running,
            _ => GuestState::Booting,
        },
    }
}

fn view(core: &Core, vm: &Resource, now: chrono::DateTime<Utc>) -> MachineView {
    let p = &vm.body["properties"];
    let name = vm.name().to_owned();
    let concerns = Concerns::of(&vm.body);
    let joins_cluster = !core.faults.applies(
        FaultKind::NeverJoins,
        Target {
            operation: "node.join",
            method: "GET",
            path: vm.id(),
            vm: Some(&name),
            zone: concerns.zone.as_deref(),
            size: concerns.size.as_deref(),
            priority: concerns.priority.as_deref(),
        },
    );
    let tags = vm.body["tags"]
        .as_object()
        .map(|t| {
            t.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| v.to_string()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let custom_data = p["osProfile"]["customData"].as_str().map(|data| {
        base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_else(|_| data.to_owned())
    });
    MachineView {
        id: vm.id().to_owned(),
        computer_name: p["osProfile"]["computerName"]
            .as_str()
            .unwrap_or(&name)
            .to_owned(),
        name,
        location: vm.location().to_owned(),
        zone: vm.body["zones"][0].as_str().map(str::to_owned),
        vm_size: p["hardwareProfile"]["vmSize"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        tags,
        custom_data,
        guest: guest(vm, now),
        joins_cluster,
    }
}

fn to_compute(error: ArmError, vm_id: &str, disk_id: &str) -> ComputeError {
    match error {
        ArmError::ResourceNotFound(id) if key(&id) == key(vm_id) => {
            ComputeError::VmNotFound(vm_id.to_owned())
        }
        ArmError::ResourceNotFound(_) => ComputeError::DiskNotFound(disk_id.to_owned()),
        ArmError::AttachedElsewhere { managed_by, .. } => ComputeError::AttachedElsewhere {
            disk: disk_id.to_owned(),
            managed_by,
        },
        ArmError::Busy(_) => ComputeError::Busy(vm_id.to_owned()),
        ArmError::Rejected {
            status: 409,
            ref code,
            ..
        } if code == "Conflict" => ComputeError::Busy(vm_id.to_owned()),
        ArmError::Throttled { .. } => ComputeError::Failed {
            code: "TooManyRequests".into(),
            message: error.to_string(),
        },
        other => ComputeError::Failed {
            code: other.code().to_owned(),
            message: other.to_string(),
        },
    }
}

impl Emulator {
    /// Starts a `csi.attach` or `csi.detach`; `None` when there is nothing to do.
    fn start_csi(
        &self,
        vm_id: &str,
        disk_id: &str,
        attach: bool,
    ) -> Result<Option<String>, ArmError> {
        self.write(|core, now| {
            let disk = core
                .state
                .get(disk_id)
                .filter(|d| d.kind == Kind::Disk)
                .cloned();
            let vm = core
                .state
                .get(vm_id)
                .filter(|v| v.kind == Kind::Vm)
                .cloned();
            let pending = |core: &Core, d: &Resource| {
                d.busy
                    .as_ref()
                    .and_then(|b| core.state.operations.get(b))
                    .filter(|op| key(&op.resource) == key(vm_id))
                    .filter(|op| {
                        let list = if attach { &op.attach } else { &op.detach };
                        list.iter().any(|x| key(x) == key(disk_id))
                    })
                    .map(|op| op.id.clone())
            };
            if attach {
                let vm = vm.ok_or_else(|| ArmError::ResourceNotFound(vm_id.to_owned()))?;
                let disk = disk.ok_or_else(|| ArmError::ResourceNotFound(disk_id.to_owned()))?;
                if disk.body["managedBy"]
                    .as_str()
                    .is_some_and(|m| key(m) == key(vm_id))
                {
                    return Ok(pending(core, &disk));
                }
                data_disks::check_attachable(&core.state, vm_id, disk_id)?;
                return begin(core, now, &vm, disk_id, true).map(Some);
            }
            let Some(disk) = disk else { return Ok(None) };
            let attached_here = disk.body["managedBy"]
                .as_str()
                .is_some_and(|m| key(m) == key(vm_id));
            if !attached_here {
                return Ok(pending(core, &disk));
            }
            if let Some(op) = pending(core, &disk) {
                return Ok(Some(op));
            }
            let Some(vm) = vm else {
                data_disks::release_disk(&mut core.state, disk_id);
                return Ok(None);
            };
            begin(core, now, &vm, disk_id, false).map(Some)
        })
    }

    /// Waits for the operation to end. With `detaching` (VM id, disk id), also ends as soon as
    /// the disk is no longer attached to that VM (say it was force-detached through ARM while
    /// this detach was held by a `hang_detach` rule): the disk's state is re-checked on every
    /// change notification.
    async fn wait(&self, op_id: &str, detaching: Option<(&str, &str)>) -> Result<(), ComputeError> {
        let mut changes = self.changes();
        loop {
            let (status, released) = self.read(|core| {
                let status = core
                    .state
                    .operations
                    .get(op_id)
                    .map(|o| (o.status, o.error.clone()));
                let released = detaching.is_some_and(|(vm_id, disk_id)| {
                    core.state
                        .get(disk_id)
                        .and_then(|d| d.body["managedBy"].as_str())
                        .is_none_or(|m| key(m) != key(vm_id))
                });
                (status, released)
            });
            if released && matches!(status, Some((OpStatus::InProgress, _))) {
                tracing::debug!(
                    op = op_id,
                    "the disk is no longer attached: the detach is done"
                );
                return Ok(());
            }
            match status {
                None => {
                    return Err(ComputeError::Failed {
                        code: "OperationNotFound".into(),
                        message: format!("operation {op_id} vanished"),
                    });
                }
                Some((OpStatus::Succeeded, _)) => return Ok(()),
                Some((OpStatus::Failed | OpStatus::Canceled, error)) => {
                    let (code, message) = error.map(|e| (e.code, e.message)).unwrap_or_else(|| {
                        ("Canceled".into(), "The operation was canceled.".into())
                    });
                    return Err(ComputeError::Failed { code, message });
                }
                Some((OpStatus::InProgress, _)) => {}
            }
            let _ = tokio::time::timeout(RECHECK, changes.changed()).await;
        }
    }
}

/// Starts the operation that attaches or detaches `disk_id` on `vm`.
fn begin(
    core: &mut Core,
    now: chrono::DateTime<Utc>,
    vm: &Resource,
    disk_id: &str,
    attach: bool,
) -> Result<String, ArmError> {
    vm.ensure_idle()?;
    let name = if attach { "csi.attach" } else { "csi.detach" };
    let concerns = Concerns::of(&vm.body);
    let target = Target {
        operation: name,
        method: "POST",
        path: vm.id(),
        vm: Some(vm.name()),
        zone: concerns.zone.as_deref(),
        size: concerns.size.as_deref(),
        priority: concerns.priority.as_deref(),
    };
    let kinds = [
        FaultKind::Throttle,
        FaultKind::ServerError,
        FaultKind::Conflict,
    ];
    if let Some(fired) = core.faults.fire(&kinds, target) {
        let error = super::faults::fault_error(fired.rule.kind, &fired.rule, vm.id());
        if let Some(error) = error {
            return Err(error);
        }
    }
    let old = data_disks::entries_of(&vm.body);
    let mut entries = old.clone();
    if attach {
        entries.push(json!({"createOption": "Attach", "managedDisk": {"id": disk_id}, "deleteOption": "Detach"}));
    } else {
        for entry in entries
            .iter_mut()
            .filter(|e| entry_disk(e).is_some_and(|d| key(d) == key(disk_id)))
        {
            entry["toBeDetached"] = json!(true);
        }
    }
    let plan = data_disks::plan(&core.state, vm.id(), &old, entries)?;
    if !attach && plan.detach.is_empty() {
        // The VM body did not list the disk: release it directly.
        data_disks::release_disk(&mut core.state, disk_id);
    }
    data_disks::commit(&mut core.state, vm.id(), &plan);
    if let Some(r) = core.state.get_mut(vm.id()) {
        obj_at(&mut r.body["properties"], "storageProfile")
            .insert("dataDisks".into(), json!(plan.entries));
        r.set_provisioning_state("Updating");
    }
    let sub = vm.id().split('/').nth(2).unwrap_or_default().to_owned();
    let op = core.begin(
        OpSpec {
            name,
            method: "POST",
            path: vm.id(),
            vm: Some(vm.name()),
            kind: Kind::Vm,
            action: Action::Update,
            resource: vm.id().to_owned(),
            subscription: &sub,
            location: vm.location().to_owned(),
            api_version: super::api_versions::VM_DEFAULT,
            steps: vec![if attach {
                Step::DiskAttach
            } else {
                Step::DiskDetach
            }],
            attach: plan.attach,
            detach: plan.detach,
            force_detach: Vec::new(),
            created: Vec::new(),
            fingerprint: None,
        },
        now,
    );
    tracing::debug!(
        vm = name_of(vm.id()),
        disk = name_of(disk_id),
        op = name,
        "csi operation"
    );
    Ok(op.id)
}

impl Compute for Emulator {
    fn machines(&self) -> Vec<MachineView> {
        let now = Utc::now();
        self.read(|core| {
            core.state
                .resources
                .values()
                .filter(|r| r.kind == Kind::Vm)
                .map(|vm| view(core, vm, now))
                .collect()
        })
    }

    fn running_machines(&self) -> Vec<MachineView> {
        let now = Utc::now();
        self.read(|core| {
            core.state
                .resources
                .values()
                // A guest runs only once booted: the boot time rules most VMs out cheaply.
                .filter(|r| r.kind == Kind::Vm && r.boot_at.is_some_and(|t| t <= now))
                .filter(|r| guest(r, now) == GuestState::Running)
                .map(|vm| view(core, vm, now))
                .collect()
        })
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.subscribe()
    }

    fn disk_managed_by(&self, disk_id: &str) -> Result<Option<String>, ComputeError> {
        self.read(|core| {
            let disk = core
                .state
                .get(disk_id)
                .filter(|d| d.kind == Kind::Disk)
                .ok_or_else(|| ComputeError::DiskNotFound(disk_id.to_owned()))?;
            Ok(disk.body["managedBy"].as_str().map(str::to_owned))
        })
    }

    async fn attach_disk(&self, vm_id: &str, disk_id: &str) -> Result<(), ComputeError> {
        match self.start_csi(vm_id, disk_id, true) {
            Err(e) => Err(to_compute(e, vm_id, disk_id)),
            Ok(None) => Ok(()),
            Ok(Some(op)) => self.wait(&op, None).await,
        }
    }

    async fn detach_disk(&self, vm_id: &str, disk_id: &str) -> Result<(), ComputeError> {
        match self.start_csi(vm_id, disk_id, false) {
            Err(e) => Err(to_compute(e, vm_id, disk_id)),
            Ok(None) => Ok(()),
            Ok(Some(op)) => self.wait(&op, Some((vm_id, disk_id))).await,
        }
    }
}
