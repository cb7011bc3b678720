//! Which availability zones the controller's new machines go to: the allowed zone with the
//! fewest machines of the pool's template, then of any template (as a rollout places its
//! creates, [`crate::rollout::zones_for_creates`]), so that a pool kept by its controller stays
//! spread over its zones instead of where the hashes of its machines' names put it.

use std::collections::BTreeMap;

use super::decide::Victim;
use super::machines::Machine;
use crate::capacity::choose_zones_by;

/// A create in flight and the zone it was given (none when the pool has no zones).
pub type Creating = (String, Option<String>);

/// The zone of each of `count` new machines of `template_hash` and `vm_size` among the pool's
/// `zones` (one entry per machine; `None` when the pool has no zones). Counted per zone: every
/// machine that stays (it counts toward replicas and is not among `leaving`) by its VM's zone,
/// and each create of `creating` whose VM is not listed yet by the zone it was given.
pub fn zones_for_creates(
    machines: &[Machine],
    leaving: &[Victim],
    creating: &[Creating],
    template_hash: &str,
    count: u32,
    vm_size: &str,
    zones: &[String],
) -> Vec<Option<String>> {
    let (of_template, of_any) = counts(machines, leaving, creating, template_hash);
    choose_zones_by(count, vm_size, zones, &of_template, &of_any, &[], 0)
}

/// The zone and capacity type of each of `count` new machines of a pool whose `template`
/// (hashed `template_hash`) lists capacity types, allowed in `zones`: counted as
/// [`zones_for_creates`] counts, each goes to the first of the template's types with an
/// offering that `unavailable` does not set aside at `now` (Unix seconds), see
/// [`crate::capacity::offering::choose_placements`].
#[allow(clippy::too_many_arguments)]
pub fn placements_for_creates(
    machines: &[Machine],
    leaving: &[Victim],
    creating: &[Creating],
    template_hash: &str,
    count: u32,
    template: &crate::pool::MachineTemplate,
    zones: &[String],
    unavailable: &[crate::capacity::Exhausted],
    now: i64,
) -> Vec<crate::capacity::offering::Placement> {
    let (of_template, of_any) = counts(machines, leaving, creating, template_hash);
    crate::capacity::offering::choose_placements(
        count,
        &template.vm_size,
        zones,
        &template.allowed_capacity_types(),
        &of_template,
        &of_any,
        unavailable,
        now,
    )
}

/// The machines per zone of `template_hash` and of any template: every machine that stays (it
/// counts toward replicas and is not among `leaving`) by its VM's zone, and each create of
/// `creating` whose VM is not listed yet by the zone it was given.
fn counts(
    machines: &[Machine],
    leaving: &[Victim],
    creating: &[Creating],
    template_hash: &str,
) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
    let mut of_template: BTreeMap<String, u32> = BTreeMap::new();
    let mut of_any: BTreeMap<String, u32> = BTreeMap::new();
    let mut add = |zone: &str, current: bool| {
        if current {
            *of_template.entry(zone.to_owned()).or_default() += 1;
        }
        *of_any.entry(zone.to_owned()).or_default() += 1;
    };
    let stays = |m: &Machine| m.counts() && !leaving.iter().any(|v| v.name == m.name);
    for machine in machines.iter().filter(|m| stays(m)) {
        if let Some(zone) = machine.vm.as_ref().and_then(|vm| vm.zone.as_deref()) {
            add(zone, machine.template_hash == template_hash);
        }
    }
    for (name, zone) in creating {
        let listed = machines
            .iter()
            .any(|m| &m.name == name && m.vm.as_ref().is_some_and(|vm| vm.zone.is_some()));
        if let (false, Some(zone)) = (listed, zone) {
            // A create in flight makes a machine of the template in force.
            add(zone, true);
        }
    }
    (of_template, of_any)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::decide::VictimReason;
    use crate::controller::machines::{Work, WorkKind};
    use crate::controller::test_support::vm;
    use crate::rollout::PoolVm;

    fn machine(name: &str, template: &str, zone: Option<&str>) -> Machine {
        Machine {
            name: name.to_owned(),
            template_hash: template.to_owned(),
            created_at: 1,
            vm: Some(PoolVm {
                zone: zone.map(str::to_owned),
                ..vm(name, template, 1)
            }),
            node: None,
            work: None,
        }
    }

    fn zones() -> Vec<String> {
        ["1", "2", "3"].map(str::to_owned).to_vec()
    }

    #[test]
    fn new_machines_fill_the_emptiest_zones_of_the_template_first() {
        let machines = [
            machine("a", "t", Some("1")),
            machine("b", "t", Some("1")),
            machine("c", "t", Some("2")),
            // Another template in zone 3: counted only to break ties.
            machine("d", "old", Some("3")),
        ];
        assert_eq!(
            zones_for_creates(&machines, &[], &[], "t", 2, "Standard_D4s_v5", &zones()),
            vec![Some("3".to_owned()), Some("2".to_owned())]
        );
    }

    #[test]
    fn victims_leave_their_zone_and_creates_in_flight_take_theirs() {
        let machines = [
            machine("a", "t", Some("1")),
            machine("b", "t", Some("2")),
            machine("c", "t", Some("3")),
        ];
        let leaving = [Victim {
            name: "a".to_owned(),
            reason: VictimReason::Unhealthy,
        }];
        assert_eq!(
            zones_for_creates(
                &machines,
                &leaving,
                &[],
                "t",
                1,
                "Standard_D4s_v5",
                &zones()
            ),
            vec![Some("1".to_owned())]
        );
        // A create in flight to zone 1, its VM not listed yet: counted there.
        let creating = [("e".to_owned(), Some("1".to_owned()))];
        let with_create = [
            machine("a", "t", Some("1")),
            machine("b", "t", Some("2")),
            Machine {
                name: "e".to_owned(),
                template_hash: String::new(),
                created_at: 0,
                vm: None,
                node: None,
                work: Some(Work {
                    kind: WorkKind::Create,
                    since: 0,
                }),
            },
        ];
        assert_eq!(
            zones_for_creates(
                &with_create,
                &[],
                &creating,
                "t",
                2,
                "Standard_D4s_v5",
                &zones()
            ),
            vec![Some("3".to_owned()), Some("2".to_owned())]
        );
    }

    #[test]
    fn a_pool_without_zones_gets_none() {
        assert_eq!(
            zones_for_creates(&[], &[], &[], "t", 2, "Standard_D4s_v5", &[]),
            vec![None, None]
        );
    }
}
