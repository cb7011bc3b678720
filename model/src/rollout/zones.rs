//! Which availability zones a rollout's new machines go to: the pool's machines counted per
//! zone ([`machines_per_zone`], also what the status shows) and one zone per create of a plan
//! ([`zones_for_creates`], the allowed zone with the fewest machines of the new template, then
//! of any, through [`crate::capacity::choose_zones_by`]), so that a pool stays spread over its zones instead of
//! where the hashes of its machines' names put it.

use std::collections::BTreeMap;

use super::observed::Activity;
use super::plan::{Plan, Victim};
use super::status::{ChildKind, InFlight, MachineView, RolloutStatus};
use crate::capacity::choose_zones_by;

/// The pool's machines per availability zone: every machine of `machines` not being deleted
/// and not among `leaving` (the deletions about to start), by the zone of its VM; and every
/// create of `in_flight` whose machine has no known zone yet (its VM not listed), by the zone it
/// was given. Machines without a zone are not counted.
pub fn machines_per_zone(
    machines: &[MachineView],
    in_flight: &[InFlight],
    leaving: &[Victim],
) -> BTreeMap<String, u32> {
    let mut per_zone: BTreeMap<String, u32> = BTreeMap::new();
    let mut add = |zone: &str| {
        let count = per_zone.entry(zone.to_owned()).or_default();
        *count = count.saturating_add(1);
    };
    let leaves = |name: &str| leaving.iter().any(|v| v.name == name);
    for machine in machines {
        if machine.activity == Activity::Deleting || leaves(&machine.name) {
            continue;
        }
        if let Some(zone) = &machine.zone {
            add(zone);
        }
    }
    for child in in_flight.iter().filter(|c| c.kind == ChildKind::Create) {
        let known = machines
            .iter()
            .any(|m| m.name == child.machine && m.zone.is_some());
        if known || leaves(&child.machine) {
            continue;
        }
        if let Some(zone) = &child.zone {
            add(zone);
        }
    }
    per_zone
}

/// The zone of each create `plan` asks for (one entry per create, in order), for a pool of
/// `vm_size` machines allowed in `zones`: the zone with the fewest machines of the new template
/// (of the last look, `status.machines`, without the plan's victims, and the creates
/// `in_flight`), then the fewest machines of any template, avoiding the zones
/// `status.exhausted` marks at `now` (Unix seconds). Counting the new template first keeps the
/// pool balanced when the rollout ends, whichever zones the old machines leave from.
pub fn zones_for_creates(
    status: &RolloutStatus,
    plan: &Plan,
    in_flight: &[InFlight],
    vm_size: &str,
    zones: &[String],
    now: i64,
) -> Vec<Option<String>> {
    let (new_per_zone, per_zone) = counts(status, plan, in_flight);
    choose_zones_by(
        plan.create,
        vm_size,
        zones,
        &new_per_zone,
        &per_zone,
        &status.exhausted,
        now,
    )
}

/// The zone and capacity type of each create `plan` asks for, for a pool whose template lists
/// capacity types: as [`zones_for_creates`] counts machines, but each create goes to the first
/// of the template's types with an offering (size, zone, type) that `status.exhausted` does not
/// set aside at `now` (Unix seconds), see [`crate::capacity::offering::choose_placements`].
pub fn placements_for_creates(
    status: &RolloutStatus,
    plan: &Plan,
    in_flight: &[InFlight],
    template: &crate::pool::MachineTemplate,
    now: i64,
) -> Vec<crate::capacity::offering::Placement> {
    let (new_per_zone, per_zone) = counts(status, plan, in_flight);
    crate::capacity::offering::choose_placements(
        plan.create,
        &template.vm_size,
        &template.zones,
        &template.allowed_capacity_types(),
        &new_per_zone,
        &per_zone,
        &status.exhausted,
        now,
    )
}

/// The machines per zone of the new template, then of every template, once `plan`'s victims
/// left and with the creates `in_flight`. The new template's come first: once the rollout is
/// done they are the pool, and the old ones go in age order whatever their zones (ties: every
/// machine, then the zones' order).
fn counts(
    status: &RolloutStatus,
    plan: &Plan,
    in_flight: &[InFlight],
) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
    let updated: Vec<MachineView> = status
        .machines
        .iter()
        .filter(|m| m.updated)
        .cloned()
        .collect();
    (
        machines_per_zone(&updated, in_flight, &plan.delete),
        machines_per_zone(&status.machines, in_flight, &plan.delete),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::observed::Health;
    use crate::rollout::plan::{Counts, DeleteReason};

    fn view(name: &str, zone: Option<&str>, activity: Activity) -> MachineView {
        MachineView {
            name: name.to_owned(),
            template_hash: "t".to_owned(),
            updated: true,
            health: Health::Ready,
            activity,
            zone: zone.map(str::to_owned),
            available_in: None,
        }
    }

    fn create(machine: &str, zone: &str) -> InFlight {
        InFlight {
            machine: machine.to_owned(),
            kind: ChildKind::Create,
            workflow_id: format!("create/dev/{machine}"),
            started_at: 0,
            zone: Some(zone.to_owned()),
            run_id: None,
            capacity_type: None,
        }
    }

    #[test]
    fn machines_are_counted_once_live_and_by_their_vm_zone() {
        let machines = [
            view("a", Some("1"), Activity::Idle),
            view("b", Some("1"), Activity::Deleting),
            view("c", Some("2"), Activity::Creating),
            view("d", Some("2"), Activity::Idle),
            view("e", None, Activity::Creating),
            view("f", None, Activity::Idle),
        ];
        let in_flight = [
            // c's VM is listed with its zone: counted once.
            create("c", "2"),
            // e's VM is not listed yet: its create's zone.
            create("e", "1"),
            // g is not in the look at all.
            create("g", "3"),
        ];
        let leaving = [Victim {
            name: "d".to_owned(),
            reason: DeleteReason::Outdated,
        }];
        let per_zone = machines_per_zone(&machines, &in_flight, &leaving);
        assert_eq!(
            per_zone,
            BTreeMap::from([
                ("1".to_owned(), 2),
                ("2".to_owned(), 1),
                ("3".to_owned(), 1)
            ])
        );
    }

    #[test]
    fn the_new_templates_machines_are_balanced_first_whatever_zones_the_old_ones_are_in() {
        // Mid-rollout: the two old machines left are both in zone 1, the one new one in zone 2.
        // Counting every machine would send the next create to zone 2 (1 against 2), and the
        // pool would end with both new machines there once the old ones are gone.
        let mut status = RolloutStatus::empty();
        let old = |name: &str| MachineView {
            updated: false,
            ..view(name, Some("1"), Activity::Idle)
        };
        status.machines = vec![
            old("old-a"),
            old("old-b"),
            view("new-a", Some("2"), Activity::Idle),
        ];
        let plan = Plan {
            create: 1,
            delete: Vec::new(),
            counts: Counts::default(),
            done: false,
            holdup: None,
            next_available_at: None,
        };
        let zones = ["1".to_owned(), "2".to_owned()];
        assert_eq!(
            zones_for_creates(&status, &plan, &[], "Standard_D2s_v5", &zones, 0),
            vec![Some("1".to_owned())]
        );
        // A tie among the new template's machines goes to the zone with fewer machines in all.
        status.machines = vec![old("old-a"), old("old-b")];
        assert_eq!(
            zones_for_creates(&status, &plan, &[], "Standard_D2s_v5", &zones, 0),
            vec![Some("2".to_owned())]
        );
    }

    #[test]
    fn two_creates_in_a_two_zone_pool_of_two_go_one_to_each_zone() {
        let mut status = RolloutStatus::empty();
        status.machines = vec![
            view("old-a", Some("1"), Activity::Idle),
            view("old-b", Some("1"), Activity::Idle),
        ];
        let plan = Plan {
            create: 2,
            delete: Vec::new(),
            counts: Counts::default(),
            done: false,
            holdup: None,
            next_available_at: None,
        };
        let zones = ["1".to_owned(), "2".to_owned()];
        assert_eq!(
            zones_for_creates(&status, &plan, &[], "Standard_D2s_v5", &zones, 0),
            vec![Some("2".to_owned()), Some("2".to_owned())]
        );
        // The old machines about to be deleted do not count: one to each zone.
        let replacing = Plan {
            delete: vec![
                Victim {
                    name: "old-a".to_owned(),
                    reason: DeleteReason::Outdated,
                },
                Victim {
                    name: "old-b".to_owned(),
                    reason: DeleteReason::Outdated,
                },
            ],
            ..plan
        };
        assert_eq!(
            zones_for_creates(&status, &replacing, &[], "Standard_D2s_v5", &zones, 0),
            vec![Some("1".to_owned()), Some("2".to_owned())]
        );
    }
}
