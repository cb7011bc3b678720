//! How RollingUpdate books a create that failed for want of capacity: the VM size and the zone
//! it was created in are marked exhausted ([`crate::capacity`]) in the status, which continue-as-new
//! carries to the next run; the failure is listed but not counted against `max_failures` while
//! another zone of the pool has room (the next look plans a replacement under a new name, and
//! [`crate::capacity::choose_zone`] sends it elsewhere). When every zone is exhausted for the
//! size, the failure counts, so that a region without capacity pauses the rollout as before.

use super::booking::ChildEnd;
use super::status::{ChildKind, InFlight, RolloutStatus};
use crate::capacity::offering::{Refusal, all_set_aside, describe, refusal_in, set_aside};
use crate::capacity::{all_exhausted, allocation_failure_in, mark_exhausted};
use crate::machine::zone_for;
use crate::pool::{CapacityType, MachineTemplate};
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

/// A create of a pool whose template lists capacity types, refused for want of capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferingRefusal {
    /// The zone it was created in (none: the pool has no zones).
    pub zone: Option<String>,
    /// The capacity type it was created as.
    pub capacity: CapacityType,
    /// The refusal's code and what it sets aside.
    pub refusal: Refusal,
    /// The child's failure, as it reported it.
    pub reason: String,
}

/// The refusal for capacity a child's end tells, if any, for a pool of `template` that lists
/// capacity types: a create (`entry`) that failed with a refusal code in its text
/// ([`crate::capacity::offering::refusal_in`]), in the zone and as the type the rollout gave it
/// (else the template's preferred type).
pub fn offering_refusal_of(
    entry: &InFlight,
    end: &ChildEnd,
    template: &MachineTemplate,
) -> Option<OfferingRefusal> {
    let ChildEnd::Failed(reason) = end else {
        return None;
    };
    if entry.kind != ChildKind::Create || template.capacity_types.is_empty() {
        return None;
    }
    let capacity = entry
        .capacity_type
        .unwrap_or_else(|| template.preferred_capacity_type());
    let refusal = refusal_in(reason, capacity)?;
    Some(OfferingRefusal {
        zone: entry.zone.clone(),
        capacity,
        refusal,
        reason: reason.clone(),
    })
}

impl RolloutStatus {
    /// Books `entry`, a create of a pool of `template` refused for capacity (`refused`) at
    /// `at_millis` (Unix milliseconds): sets its offering aside for `ttl` (the pool's,
    /// [`crate::capacity::offering::OFFERING_TTL`] unless it says), lists the failure saying so, and counts it only when
    /// every offering of the pool is now set aside.
    pub fn book_offering_refusal(
        &mut self,
        entry: InFlight,
        refused: OfferingRefusal,
        template: &MachineTemplate,
        ttl: std::time::Duration,
        at_millis: i64,
        pool: &str,
    ) {
        let at = at_millis.div_euclid(1000);
        let marked = set_aside(
            &mut self.exhausted,
            &template.vm_size,
            refused.zone.as_deref(),
            refused.capacity,
            refused.refusal,
            at,
            ttl,
        );
        let types = template.allowed_capacity_types();
        let everywhere = all_set_aside(
            &self.exhausted,
            &template.vm_size,
            &template.zones,
            &types,
            at,
        );
        let what = if everywhere {
            format!(
                "Azure has no room for {} ({}), nor for any other offering of the pool: counted",
                describe_place(&refused, &template.vm_size),
                refused.refusal.code
            )
        } else {
            format!(
                "Azure has no room for {} ({}): {} set aside for {}, the machine is made elsewhere (not counted)",
                describe_place(&refused, &template.vm_size),
                refused.refusal.code,
                describe(&marked),
                duration(ttl)
            )
        };
        let reason = format!("{what}; {}", refused.reason);
        self.book_failure(entry, reason, everywhere, at, pool);
    }
}

/// `spot Standard_D4s_v5 in zone 1`, `on-demand Standard_D4s_v5` (no zone).
fn describe_place(refused: &OfferingRefusal, vm_size: &str) -> String {
    match &refused.zone {
        Some(zone) => format!("{} {vm_size} in zone {zone}", refused.capacity),
        None => format!("{} {vm_size}", refused.capacity),
    }
}

#[cfg(test)]
mod tests;
