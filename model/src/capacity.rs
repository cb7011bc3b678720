//! Capacity that ran out: which ARM error codes mean Azure had no room for a VM size in a zone
//! ([`is_allocation_failure`]), the (VM size, zone) pairs marked exhausted for
//! [`EXHAUSTED_TTL`] after such a failure ([`Exhausted`]), and the zone a new machine goes to
//! so that it avoids them: [`choose_zones`] (the allowed zone with the fewest machines of the
//! pool, so zones stay balanced) or, for runs started before it, [`choose_zone`] (a hash of the
//! machine's name).
//!
//! An allocation failure says nothing about the template: the same request succeeds in a zone
//! with room, or in the same zone later. So a rollout does not count it against its failure
//! budget while another zone of the pool is free; it replaces the machine under a new name in
//! the next zone that is not exhausted. Like Karpenter's cache of unavailable offerings, an
//! entry is forgotten after a TTL, and the zone is tried again.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::machine::zone_for;
use crate::pool::CapacityType;

pub mod offering;

/// How long a (VM size, zone) stays exhausted after an allocation failure: 3 minutes, the TTL of
/// Karpenter's cache of unavailable offerings. Short, because Azure's capacity comes back within
/// minutes as often as not; long enough that the machines planned in the next rounds go
/// elsewhere.
pub const EXHAUSTED_TTL: Duration = Duration::from_secs(180);

/// At most this many entries are kept (a pool has one VM size and at most a handful of zones:
/// the bound only keeps a status from growing without end); the one that expires first goes.
pub const MAX_EXHAUSTED: usize = 32;

/// The ARM error codes that say Azure has no capacity for the VM size (in the zone, or in the
/// region for the zone's request): the request is fine and succeeds where there is room.
pub const ALLOCATION_FAILURE_CODES: [&str; 5] = [
    "ZonalAllocationFailed",
    "AllocationFailed",
    "OverconstrainedAllocationRequest",
    "OverconstrainedZonalAllocationRequest",
    "SkuNotAvailable",
];

/// Whether an ARM error `code` is an allocation failure (compared case-insensitively, as ARM's
/// codes come in either casing).
pub fn is_allocation_failure(code: &str) -> bool {
    ALLOCATION_FAILURE_CODES
        .iter()
        .any(|known| known.eq_ignore_ascii_case(code.trim()))
}

/// The allocation failure code a failure's text names, if any: the first word of `text` (letters
/// and digits between other characters) that [`is_allocation_failure`] accepts, as the failure of
/// a VM's creation reads (`VM web-x failed to provision: ZonalAllocationFailed: ...`).
pub fn allocation_failure_in(text: &str) -> Option<&'static str> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty())
        .find_map(|word| {
            ALLOCATION_FAILURE_CODES
                .iter()
                .find(|known| known.eq_ignore_ascii_case(word))
                .copied()
        })
}

/// An offering Azure had no room for (a VM size in a zone, of one capacity type or of every
/// one), until a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exhausted {
    /// The VM size, e.g. `Standard_D4s_v5`.
    pub vm_size: String,
    /// The availability zone, e.g. `2`; empty: every zone (and a pool without zones).
    pub zone: String,
    /// The ARM error code that marked it, e.g. `ZonalAllocationFailed`.
    pub code: String,
    /// Until when it counts as exhausted, Unix seconds.
    pub until: i64,
    /// The capacity type it is about; none: every type (the zone has no room for the size at
    /// all, and every entry made before capacity types).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<CapacityType>,
}

impl Exhausted {
    /// Whether this entry is about `vm_size` in `zone` and still holds at `now` (Unix seconds),
    /// whatever the capacity type.
    pub fn holds(&self, vm_size: &str, zone: &str, now: i64) -> bool {
        self.until > now
            && self.vm_size.eq_ignore_ascii_case(vm_size)
            && (self.zone == zone || self.zone.is_empty())
            && self.capacity_type.is_none()
    }

    /// Whether this entry sets aside `vm_size` of `capacity` in `zone` (none: a pool without
    /// zones) at `now` (Unix seconds).
    pub fn sets_aside(
        &self,
        vm_size: &str,
        zone: Option<&str>,
        capacity: CapacityType,
        now: i64,
    ) -> bool {
        self.until > now
            && self.vm_size.eq_ignore_ascii_case(vm_size)
            && (self.zone.is_empty() || Some(self.zone.as_str()) == zone)
            && self.capacity_type.is_none_or(|kind| kind == capacity)
    }
}

/// Marks `vm_size` in `zone` exhausted from `now` (Unix seconds) for [`EXHAUSTED_TTL`], because
/// of `code`: the entries that expired go, an entry for the same pair is renewed, and the list
/// keeps at most [`MAX_EXHAUSTED`] entries (dropping those that expire first).
pub fn mark_exhausted(
    list: &mut Vec<Exhausted>,
    vm_size: &str,
    zone: &str,
    code: &str,
    now: i64,
) -> Exhausted {
    let ttl = i64::try_from(EXHAUSTED_TTL.as_secs()).unwrap_or(i64::MAX);
    let entry = Exhausted {
        vm_size: vm_size.to_owned(),
        zone: zone.to_owned(),
        code: code.to_owned(),
        until: now.saturating_add(ttl),
        capacity_type: None,
    };
    list.retain(|e| e.until > now && !(e.vm_size.eq_ignore_ascii_case(vm_size) && e.zone == zone));
    list.push(entry.clone());
    list.sort_by_key(|e| std::cmp::Reverse(e.until));
    list.truncate(MAX_EXHAUSTED);
    list.sort_by(|a, b| (&a.vm_size, &a.zone).cmp(&(&b.vm_size, &b.zone)));
    entry
}

/// The entries of `list` that still hold at `now` (Unix seconds).
pub fn active(list: &[Exhausted], now: i64) -> Vec<Exhausted> {
    list.iter().filter(|e| e.until > now).cloned().collect()
}

/// Whether `vm_size` is exhausted in `zone` at `now` (Unix seconds).
pub fn is_exhausted(list: &[Exhausted], vm_size: &str, zone: &str, now: i64) -> bool {
    list.iter().any(|e| e.holds(vm_size, zone, now))
}

/// Whether every one of `zones` is exhausted for `vm_size` at `now` (false for a pool without
/// zones: there is nothing to avoid).
pub fn all_exhausted(list: &[Exhausted], vm_size: &str, zones: &[String], now: i64) -> bool {
    !zones.is_empty() && zones.iter().all(|z| is_exhausted(list, vm_size, z, now))
}

/// The zone of a new `machine` of `vm_size` among the pool's `zones` (none when it has none):
/// the zone [`zone_for`] hashes its name to, unless that one is exhausted at `now`; then the
/// next zone in the pool's order (wrapping around) that is not. When every zone is exhausted,
/// the hashed zone: a create has to go somewhere, and the rollout counts that failure.
pub fn choose_zone(
    machine: &str,
    vm_size: &str,
    zones: &[String],
    exhausted: &[Exhausted],
    now: i64,
) -> Option<String> {
    let hashed = zone_for(machine, zones)?;
    let start = zones.iter().position(|z| *z == hashed).unwrap_or(0);
    let free = (0..zones.len())
        .filter_map(|offset| zones.get((start + offset) % zones.len()))
        .find(|zone| !is_exhausted(exhausted, vm_size, zone, now));
    Some(free.cloned().unwrap_or(hashed))
}

/// The zones of `count` new machines of `vm_size` among the pool's `zones` (one entry per
/// machine, each `None` when the pool has no zones), balancing the pool: each machine goes to
/// the zone with the fewest machines of the pool, counting `per_zone` (the pool's live machines
/// per zone: being created included, being deleted not) and every machine placed before it,
/// ties broken by the order of `zones`. Zones exhausted for `vm_size` at `now` are skipped
/// while another one is not; when every zone is exhausted, the fewest among all of them (a
/// create has to go somewhere, and the rollout counts that failure). Machines in zones the pool
/// no longer allows are not counted.
pub fn choose_zones(
    count: u32,
    vm_size: &str,
    zones: &[String],
    per_zone: &BTreeMap<String, u32>,
    exhausted: &[Exhausted],
    now: i64,
) -> Vec<Option<String>> {
    choose_zones_by(count, vm_size, zones, per_zone, per_zone, exhausted, now)
}

/// [`choose_zones`] with a second count to break ties: each create goes to the allowed zone with
/// the fewest `first` (e.g. the new template's machines), then the fewest `then` (every machine
/// of the pool), then the first in `zones`' order; each placed create counts in both.
pub fn choose_zones_by(
    count: u32,
    vm_size: &str,
    zones: &[String],
    first: &BTreeMap<String, u32>,
    then: &BTreeMap<String, u32>,
    exhausted: &[Exhausted],
    now: i64,
) -> Vec<Option<String>> {
    let free: Vec<&String> = zones
        .iter()
        .filter(|zone| !is_exhausted(exhausted, vm_size, zone, now))
        .collect();
    let candidates: Vec<&String> = if free.is_empty() {
        zones.iter().collect()
    } else {
        free
    };
    let count_in = |map: &BTreeMap<String, u32>, zone: &str| map.get(zone).copied().unwrap_or(0);
    let mut counts: Vec<(u32, u32)> = candidates
        .iter()
        .map(|zone| (count_in(first, zone), count_in(then, zone)))
        .collect();
    (0..count)
        .map(|_| {
            let fewest = counts
                .iter()
                .enumerate()
                .min_by_key(|(index, count)| (**count, *index))
                .map(|(index, _)| index)?;
            if let Some((first, then)) = counts.get_mut(fewest) {
                *first = first.saturating_add(1);
                *then = then.saturating_add(1);
            }
            candidates.get(fewest).map(|zone| (*zone).clone())
        })
        .collect()
}

#[cfg(test)]
mod tests;
