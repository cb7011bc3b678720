//! How RollingUpdate books a create that failed for want of capacity: the VM size and the zone
//! it was created in are marked exhausted ([`crate::capacity`]) in the status, which continue-as-new
//! carries to the next run; the failure is listed but not counted against `max_failures` while
//! another zone of the pool has room (the next look plans a replacement under a new name, and
//! [`crate::capacity::choose_zone`] sends it elsewhere). When every zone is exhausted for the
//! size, the failure counts, so that a region without capacity pauses the rollout as before.

use super::booking::ChildEnd;
use super::status::{ChildKind, InFlight, RolloutStatus};
use crate::capacity::{all_exhausted, allocation_failure_in, mark_exhausted};
use crate::machine::zone_for;
use crate::text::duration;

/// A create that failed for want of capacity in a zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortage {
    /// The zone it was created in.
    pub zone: String,
    /// The allocation failure's ARM error code.
    pub code: &'static str,
    /// The child's failure, as it reported it.
    pub reason: String,
}

/// The shortage a child's end tells, if any: a create (`entry`) of a pool with `zones` that
/// failed with an allocation failure code in its text. Its zone is the one the rollout gave it,
/// else the one its name hashes to; a pool without zones has no zone to avoid, and its
/// allocation failures are booked like any other failure.
pub fn shortage_of(entry: &InFlight, end: &ChildEnd, zones: &[String]) -> Option<Shortage> {
    let ChildEnd::Failed(reason) = end else {
        return None;
    };
    if entry.kind != ChildKind::Create {
        return None;
    }
    let code = allocation_failure_in(reason)?;
    let zone = entry
        .zone
        .clone()
        .filter(|zone| zones.contains(zone))
        .or_else(|| zone_for(&entry.machine, zones))?;
    Some(Shortage {
        zone,
        code,
        reason: reason.clone(),
    })
}

impl RolloutStatus {
    /// Books `entry`, a create of `vm_size` in the rollout of `pool` (over `zones`) that failed
    /// with `shortage` at `at_millis` (Unix milliseconds): marks the size exhausted in the zone,
    /// lists the failure saying so, and counts it only when every zone of the pool is now
    /// exhausted for the size.
    pub fn book_shortage(
        &mut self,
        entry: InFlight,
        shortage: Shortage,
        vm_size: &str,
        zones: &[String],
        at_millis: i64,
        pool: &str,
    ) {
        let at = at_millis.div_euclid(1000);
        let marked = mark_exhausted(
            &mut self.exhausted,
            vm_size,
            &shortage.zone,
            shortage.code,
            at,
        );
        let ttl = std::time::Duration::from_secs(u64::try_from(marked.until - at).unwrap_or(0));
        let everywhere = all_exhausted(&self.exhausted, vm_size, zones, at);
        let what = if everywhere {
            format!(
                "zone {} is out of capacity for {vm_size} ({}), as is every zone of the pool: counted",
                shortage.zone, shortage.code
            )
        } else {
            format!(
                "zone {} is out of capacity for {vm_size} ({}): avoided for {}, the machine is replaced in another zone (not counted)",
                shortage.zone,
                shortage.code,
                duration(ttl)
            )
        };
        let reason = format!("{what}; {}", shortage.reason);
        self.book_failure(entry, reason, everywhere, at, pool);
    }
}

#[cfg(test)]
mod tests;
