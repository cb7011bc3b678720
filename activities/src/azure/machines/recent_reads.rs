//! The VM a read activity GOT a moment ago, handed to the next read of the same VM once.
//!
//! DeleteMachine reads the VM's owner tags (`azure.read_vm_owner`) and, a moment later, its
//! drain reads the drain tag (`azure.read_drain_tag`) of the same VM: the second is answered
//! from the first GET when it comes within [`FRESH_FOR`] on the same worker, and the entry is
//! used up by it. Any other case (another worker, a later read, a write in between that this
//! cache does not see) is a plain GET, which is always correct; only tags that the delete
//! itself does not change are read this way.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::azure::virtual_machines::VirtualMachine;

/// How long a kept read may answer the next one.
pub const FRESH_FOR: Duration = Duration::from_secs(10);
/// The most VMs kept at once (older entries are dropped first when full).
const KEPT: usize = 256;

/// Recent VM reads by name, each used at most once.
#[derive(Default)]
pub struct RecentVmReads {
    reads: Mutex<HashMap<String, (Instant, VirtualMachine)>>,
}

impl RecentVmReads {
    fn reads(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, VirtualMachine)>> {
        // A panic while holding the lock left whole entries: the map is still usable.
        match self.reads.lock() {
            Ok(reads) => reads,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Keeps `vm`, just read, for the next read of `name`.
    pub fn keep(&self, name: &str, vm: &VirtualMachine) {
        self.keep_at(name, vm, Instant::now());
    }

    fn keep_at(&self, name: &str, vm: &VirtualMachine, now: Instant) {
        let mut reads = self.reads();
        reads.retain(|_, (at, _)| now.saturating_duration_since(*at) < FRESH_FOR);
        if reads.len() >= KEPT
            && let Some(oldest) = reads
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(name, _)| name.clone())
        {
            reads.remove(&oldest);
        }
        reads.insert(name.to_owned(), (now, vm.clone()));
    }

    /// The VM read as `name` less than [`FRESH_FOR`] ago, taken out (a second call gets none).
    pub fn take(&self, name: &str) -> Option<VirtualMachine> {
        self.take_at(name, Instant::now())
    }

    fn take_at(&self, name: &str, now: Instant) -> Option<VirtualMachine> {
        let (at, vm) = self.reads().remove(name)?;
        (now.saturating_duration_since(at) < FRESH_FOR).then_some(vm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(tag: &str) -> VirtualMachine {
        serde_json::from_value(serde_json::json!({
            "location": "westeurope",
            "tags": { "t": tag },
            "properties": {}
        }))
        .expect("a VM")
    }

    #[test]
    fn a_read_answers_the_next_read_once_while_fresh() {
        let reads = RecentVmReads::default();
        let now = Instant::now();
        reads.keep_at("m-1", &vm("a"), now);
        let taken = reads.take_at("m-1", now + Duration::from_secs(2));
        assert_eq!(taken.map(|vm| vm.tags["t"].clone()).as_deref(), Some("a"));
        assert!(reads.take_at("m-1", now + Duration::from_secs(3)).is_none());
        assert!(reads.take_at("m-2", now).is_none());
    }

    #[test]
    fn a_stale_read_answers_nothing() {
        let reads = RecentVmReads::default();
        let now = Instant::now();
        reads.keep_at("m-1", &vm("a"), now);
        assert!(reads.take_at("m-1", now + FRESH_FOR).is_none());
    }

    #[test]
    fn at_most_kept_reads_are_held() {
        let reads = RecentVmReads::default();
        let now = Instant::now();
        for i in 0..(KEPT + 10) {
            reads.keep_at(
                &format!("m-{i}"),
                &vm("a"),
                now + Duration::from_millis(i as u64),
            );
        }
        assert_eq!(reads.reads().len(), KEPT);
        // The oldest went first.
        assert!(reads.take_at("m-0", now).is_none());
        assert!(reads.take_at(&format!("m-{}", KEPT + 9), now).is_some());
    }
}
