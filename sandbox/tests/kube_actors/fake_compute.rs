//! A [`Compute`] for tests: machines and disks in a map, with the calls made recorded.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use nodewright_sandbox::compute::{Compute, ComputeError, GuestState, MachineView};

/// The emulator's stand-in: machines, disks with their holder, and the calls made.
#[derive(Default)]
pub struct FakeCompute {
    state: Mutex<FakeState>,
    changes: FakeChanges,
}

#[derive(Default)]
struct FakeState {
    machines: Vec<MachineView>,
    /// Disk id (lower-cased) → id of the VM holding it.
    disks: HashMap<String, Option<String>>,
    /// `("attach" | "detach", vm, disk)` for every successful call.
    calls: Vec<(&'static str, String, String)>,
}

struct FakeChanges(tokio::sync::watch::Sender<u64>);

impl Default for FakeChanges {
    fn default() -> Self {
        Self(tokio::sync::watch::channel(0).0)
    }
}

impl FakeCompute {
    fn change(&self, edit: impl FnOnce(&mut FakeState)) {
        edit(&mut self.state.lock().unwrap());
        self.changes.0.send_modify(|version| *version += 1);
    }

    pub fn put_machine(&self, machine: MachineView) {
        self.change(|state| state.machines.push(machine));
    }

    pub fn set_guest(&self, id: &str, guest: GuestState) {
        self.change(|state| {
            for machine in state.machines.iter_mut().filter(|m| m.id == id) {
                machine.guest = guest;
            }
        });
    }

    pub fn remove_machine(&self, id: &str) {
        self.change(|state| state.machines.retain(|m| m.id != id));
    }

    pub fn put_disk(&self, id: &str) {
        self.change(|state| {
            state.disks.insert(id.to_lowercase(), None);
        });
    }

    pub fn managed_by(&self, disk: &str) -> Option<String> {
        self.state
            .lock()
            .unwrap()
            .disks
            .get(&disk.to_lowercase())
            .cloned()
            .flatten()
    }

    pub fn calls(&self, kind: &str) -> Vec<(String, String)> {
        let state = self.state.lock().unwrap();
        state
            .calls
            .iter()
            .filter(|(k, _, _)| *k == kind)
            .map(|(_, vm, disk)| (vm.clone(), disk.clone()))
            .collect()
    }
}

impl Compute for FakeCompute {
    fn machines(&self) -> Vec<MachineView> {
        self.state.lock().unwrap().machines.clone()
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.0.subscribe()
    }

    fn disk_managed_by(&self, disk_id: &str) -> Result<Option<String>, ComputeError> {
        let state = self.state.lock().unwrap();
        state
            .disks
            .get(&disk_id.to_lowercase())
            .cloned()
            .ok_or_else(|| ComputeError::DiskNotFound(disk_id.to_owned()))
    }

    fn attach_disk(
        &self,
        vm_id: &str,
        disk_id: &str,
    ) -> impl Future<Output = Result<(), ComputeError>> + Send {
        let (vm_id, disk_id) = (vm_id.to_owned(), disk_id.to_owned());
        async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut state = self.state.lock().unwrap();
            let holder = state
                .disks
                .get_mut(&disk_id.to_lowercase())
                .ok_or_else(|| ComputeError::DiskNotFound(disk_id.clone()))?;
            match holder {
                Some(other) if !other.eq_ignore_ascii_case(&vm_id) => {
                    return Err(ComputeError::AttachedElsewhere {
                        disk: disk_id,
                        managed_by: other.clone(),
                    });
                }
                Some(_) => return Ok(()),
                None => *holder = Some(vm_id.clone()),
            }
            state.calls.push(("attach", vm_id, disk_id));
            Ok(())
        }
    }

    fn detach_disk(
        &self,
        vm_id: &str,
        disk_id: &str,
    ) -> impl Future<Output = Result<(), ComputeError>> + Send {
        let (vm_id, disk_id) = (vm_id.to_owned(), disk_id.to_owned());
        async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut state = self.state.lock().unwrap();
            let holder = state
                .disks
                .get_mut(&disk_id.to_lowercase())
                .ok_or_else(|| ComputeError::DiskNotFound(disk_id.clone()))?;
            if holder
                .as_deref()
                .is_some_and(|held| held.eq_ignore_ascii_case(&vm_id))
            {
                *holder = None;
                state.calls.push(("detach", vm_id, disk_id));
            }
            Ok(())
        }
    }
}
