//! Offerings (a VM size, in a zone, of a capacity type) that Azure refused for want of room, and
//! where a new machine of a pool that allows several goes around them.
//!
//! As Karpenter's provider for Azure does, a create refused for capacity sets its offering
//! aside for a TTL (default [`OFFERING_TTL`], an hour), and the next machine goes to the next
//! allowed zone, then to the next capacity type the template allows (Spot, then on-demand).
//! What a refusal sets aside depends on its code ([`refusal_in`]): `ZonalAllocationFailed` says
//! the zone has no room for the size at all (both types); `OverconstrainedAllocationRequest`,
//! a Spot quota exhausted (`OperationNotAllowed` naming the low-priority quota) or a Spot price
//! above the maximum set aside the type in every zone; the others the offering itself.
//!
//! Configuration errors (an invalid maximum price, a size without Spot) are not refusals of
//! capacity: the pool file's validation refuses the first, and the second fails its create
//! without a retry.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Exhausted, MAX_EXHAUSTED};
use crate::pool::CapacityType;

/// How long an offering stays set aside after Azure refused it for capacity, unless the pool
/// says otherwise: an hour, as Karpenter's provider for Azure keeps its unavailable offerings.
/// Spot capacity comes back on Azure's schedule, not the pool's; retrying sooner mostly gets
/// the same refusal and delays the machine.
pub const OFFERING_TTL: Duration = Duration::from_secs(3600);

/// What part of the offerings a refusal sets aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The size of the refused capacity type in the refused zone.
    Offering,
    /// The size in the refused zone, of every capacity type.
    Zone,
    /// The size of the refused capacity type, in every zone.
    CapacityType,
}

/// A create refused for want of capacity: the ARM code and what it sets aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The ARM error code, e.g. `SkuNotAvailable`.
    pub code: &'static str,
    /// What it sets aside.
    pub scope: Scope,
}

/// The codes of refusals for capacity, and what each sets aside.
const REFUSALS: [(&str, Scope); 6] = [
    ("ZonalAllocationFailed", Scope::Zone),
    ("AllocationFailed", Scope::Offering),
    ("OverconstrainedZonalAllocationRequest", Scope::Offering),
    ("OverconstrainedAllocationRequest", Scope::CapacityType),
    ("SkuNotAvailable", Scope::Offering),
    ("SpotPriceGreaterThanProvidedMaxPrice", Scope::CapacityType),
];

/// Words of an `OperationNotAllowed` message that say the Spot (low-priority) vCPU quota is
/// exhausted, e.g. "Operation could not be completed as it results in exceeding approved
/// LowPriorityCores quota".
const SPOT_QUOTA_WORDS: [&str; 3] = ["lowpriority", "low-priority", "low priority"];

/// The refusal for capacity a create's failure `text` names, if any, for a machine of
/// `capacity`: the first word of the text that is one of the codes above (as a whole word,
/// case-insensitively), or `OperationNotAllowed` about the low-priority quota for a Spot
/// machine. A Spot price above the maximum counts only for a Spot machine.
pub fn refusal_in(text: &str, capacity: CapacityType) -> Option<Refusal> {
    let words = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty());
    for word in words {
        if let Some((code, scope)) = REFUSALS
            .iter()
            .find(|(code, _)| code.eq_ignore_ascii_case(word))
        {
            if *code == "SpotPriceGreaterThanProvidedMaxPrice" && capacity != CapacityType::Spot {
                continue;
            }
            return Some(Refusal {
                code,
                scope: *scope,
            });
        }
        if word.eq_ignore_ascii_case("OperationNotAllowed") && capacity == CapacityType::Spot {
            let lower = text.to_ascii_lowercase();
            if SPOT_QUOTA_WORDS.iter().any(|w| lower.contains(w)) {
                return Some(Refusal {
                    code: "OperationNotAllowed",
                    scope: Scope::CapacityType,
                });
            }
        }
    }
    None
}

/// A place for a new machine: its zone (none when the pool has no zones) and capacity type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The availability zone.
    pub zone: Option<String>,
    /// Spot or on-demand.
    pub capacity: CapacityType,
}

/// Sets aside what `refusal` of a `capacity` machine of `vm_size` in `zone` says, from `now`
/// (Unix seconds) for `ttl`: an entry for the same offering is renewed, entries that expired
/// go, and at most [`MAX_EXHAUSTED`] are kept (those that expire first go). Returns the entry.
pub fn set_aside(
    list: &mut Vec<Exhausted>,
    vm_size: &str,
    zone: Option<&str>,
    capacity: CapacityType,
    refusal: Refusal,
    now: i64,
    ttl: Duration,
) -> Exhausted {
    let ttl = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    let (zone, capacity_type) = match refusal.scope {
        Scope::Offering => (zone.unwrap_or_default(), Some(capacity)),
        Scope::Zone => (zone.unwrap_or_default(), None),
        Scope::CapacityType => ("", Some(capacity)),
    };
    let entry = Exhausted {
        vm_size: vm_size.to_owned(),
        zone: zone.to_owned(),
        code: refusal.code.to_owned(),
        until: now.saturating_add(ttl),
        capacity_type,
    };
    list.retain(|e| {
        e.until > now
            && !(e.vm_size.eq_ignore_ascii_case(vm_size)
                && e.zone == entry.zone
                && e.capacity_type == entry.capacity_type)
    });
    list.push(entry.clone());
    list.sort_by_key(|e| std::cmp::Reverse(e.until));
    list.truncate(MAX_EXHAUSTED);
    list.sort_by(|a, b| {
        (&a.vm_size, &a.zone, a.capacity_type).cmp(&(&b.vm_size, &b.zone, b.capacity_type))
    });
    entry
}

/// Whether `vm_size` of `capacity` in `zone` is set aside at `now`.
pub fn is_set_aside(
    list: &[Exhausted],
    vm_size: &str,
    zone: Option<&str>,
    capacity: CapacityType,
    now: i64,
) -> bool {
    list.iter()
        .any(|e| e.sets_aside(vm_size, zone, capacity, now))
}

/// The pool's offerings: each of `types` (in order of preference) in each of `zones` (or once,
/// without a zone, for a pool without zones).
fn offerings(zones: &[String], types: &[CapacityType]) -> Vec<(CapacityType, Option<String>)> {
    let zones: Vec<Option<String>> = if zones.is_empty() {
        vec![None]
    } else {
        zones.iter().cloned().map(Some).collect()
    };
    types
        .iter()
        .flat_map(|kind| zones.iter().map(move |zone| (*kind, zone.clone())))
        .collect()
}

/// Whether every offering of the pool (`vm_size`, its `zones` and capacity `types`) is set
/// aside at `now`: a refusal then counts as a failure, since no other place is left.
pub fn all_set_aside(
    list: &[Exhausted],
    vm_size: &str,
    zones: &[String],
    types: &[CapacityType],
    now: i64,
) -> bool {
    offerings(zones, types)
        .iter()
        .all(|(kind, zone)| is_set_aside(list, vm_size, zone.as_deref(), *kind, now))
}

/// The places of `count` new machines of `vm_size` of a pool allowed in `zones` (none: no
/// zones) as the capacity `types` in order of preference: each goes to the first type with a
/// zone not set aside at `now`, in its zone with the fewest `first` machines, then the fewest
/// `then`, then the first in `zones`' order (as [`super::choose_zones_by`]); each placed
/// machine counts in both. When every offering is set aside, the preferred type in its
/// emptiest zone: a create has to go somewhere, and its failure is counted.
#[allow(clippy::too_many_arguments)]
pub fn choose_placements(
    count: u32,
    vm_size: &str,
    zones: &[String],
    types: &[CapacityType],
    first: &BTreeMap<String, u32>,
    then: &BTreeMap<String, u32>,
    list: &[Exhausted],
    now: i64,
) -> Vec<Placement> {
    let mut first = first.clone();
    let mut then = then.clone();
    let count_in = |map: &BTreeMap<String, u32>, zone: &Option<String>| {
        zone.as_ref()
            .and_then(|zone| map.get(zone))
            .copied()
            .unwrap_or(0)
    };
    let preferred = types.first().copied().unwrap_or(CapacityType::OnDemand);
    let all = offerings(zones, &[preferred]);
    let open: Vec<(CapacityType, Option<String>)> = offerings(zones, types)
        .into_iter()
        .filter(|(kind, zone)| !is_set_aside(list, vm_size, zone.as_deref(), *kind, now))
        .collect();
    (0..count)
        .map(|_| {
            let kind = open.first().map_or(preferred, |(kind, _)| *kind);
            let candidates: Vec<&Option<String>> = if open.is_empty() {
                all.iter().map(|(_, zone)| zone).collect()
            } else {
                open.iter()
                    .filter(|(k, _)| *k == kind)
                    .map(|(_, zone)| zone)
                    .collect()
            };
            let zone = candidates
                .iter()
                .enumerate()
                .min_by_key(|(index, zone)| (count_in(&first, zone), count_in(&then, zone), *index))
                .map(|(_, zone)| (*zone).clone())
                .unwrap_or_default();
            if let Some(name) = &zone {
                for map in [&mut first, &mut then] {
                    let slot = map.entry(name.clone()).or_default();
                    *slot = slot.saturating_add(1);
                }
            }
            Placement {
                zone,
                capacity: kind,
            }
        })
        .collect()
}

/// What a create's refusal for capacity did to the offerings: the entry set aside, and whether
/// the failure counts (every offering of the pool is now set aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Booked {
    /// The entry made or renewed.
    pub entry: Exhausted,
    /// No offering of the pool is left: the failure counts as any other.
    pub counted: bool,
}

/// Books the failure `text` of a create of a pool of `template` (listing capacity types) that
/// was made in `zone` as `capacity`: when it is a refusal for capacity ([`refusal_in`]), sets
/// its offerings aside in `list` from `now` (Unix seconds) for `ttl` and says whether it counts.
/// `None`: not a refusal for capacity, or a template without capacity types.
pub fn book_refusal(
    list: &mut Vec<Exhausted>,
    template: &crate::pool::MachineTemplate,
    zone: Option<&str>,
    capacity: Option<CapacityType>,
    text: &str,
    now: i64,
    ttl: Duration,
) -> Option<Booked> {
    if template.capacity_types.is_empty() {
        return None;
    }
    let capacity = capacity.unwrap_or_else(|| template.preferred_capacity_type());
    let refusal = refusal_in(text, capacity)?;
    let entry = set_aside(list, &template.vm_size, zone, capacity, refusal, now, ttl);
    let counted = all_set_aside(
        list,
        &template.vm_size,
        &template.zones,
        &template.allowed_capacity_types(),
        now,
    );
    Some(Booked { entry, counted })
}

/// An entry for people, e.g. `spot Standard_D4s_v5 in zone 1: SkuNotAvailable` or
/// `Standard_D4s_v5 in every zone: OverconstrainedAllocationRequest`.
pub fn describe(entry: &Exhausted) -> String {
    let kind = entry
        .capacity_type
        .map(|kind| format!("{kind} "))
        .unwrap_or_default();
    let zone = if entry.zone.is_empty() {
        "every zone".to_owned()
    } else {
        format!("zone {}", entry.zone)
    };
    format!("{kind}{} in {zone}: {}", entry.vm_size, entry.code)
}

#[cfg(test)]
mod tests;
