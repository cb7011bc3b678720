//! Headroom before creates: how many of the machines a batch wants the subnet's free addresses
//! and the vCPU quotas leave room for ([`fit`]), and, when not all, which limit holds it and a
//! message that names it ("subnet workers: 2 free addresses, 3 needed").
//!
//! Azure refuses a NIC in a full subnet and a VM over a vCPU quota: each such create is a failed
//! machine. So a batch (a rollout's surge, a scale-up, a replacement) is cut to what fits before
//! anything starts, keeping a buffer free, and waits at zero. The inputs are read from ARM by
//! activities (the subnet's prefix and IP configurations, or the virtual network's usages; the
//! compute usages; the size's vCPUs from the SKUs); this module only does the arithmetic, so it
//! is the same in a workflow, the CLI's preflight and the tests.
//!
//! Azure keeps five addresses of every subnet (network, gateway, two DNS, broadcast):
//! [`AZURE_RESERVED_PER_SUBNET`]. Machines already started but whose NIC or VM ARM does not
//! count yet (`pending`) take their share first. [`reading`] is what an activity read from ARM
//! and [`reading::cut`] the whole decision for one batch (restricted zones and sizes too).

pub mod reading;

use serde::{Deserialize, Serialize};

pub use reading::{Cut, HeadroomQuestion, HeadroomReading, Restriction, SkippedZone, cut};

/// Addresses Azure reserves in every subnet: the first four and the last.
pub const AZURE_RESERVED_PER_SUBNET: u64 = 5;

/// The free addresses of a subnet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubnetRoom {
    /// The subnet's name, for messages.
    pub name: String,
    /// Addresses machines can use (the prefix's size less Azure's reserved ones).
    pub usable: u64,
    /// Addresses in use (IP configurations of the subnet).
    pub used: u64,
}

impl SubnetRoom {
    /// A subnet of IPv4 prefix length `prefix_len` with `used` addresses in use; none for a
    /// prefix length above 32.
    pub fn from_prefix(name: &str, prefix_len: u8, used: u64) -> Option<Self> {
        let size = 1u64.checked_shl(32u32.checked_sub(u32::from(prefix_len))?)?;
        Some(Self {
            name: name.to_owned(),
            usable: size.saturating_sub(AZURE_RESERVED_PER_SUBNET),
            used,
        })
    }

    /// Addresses not in use.
    pub fn free(&self) -> u64 {
        self.usable.saturating_sub(self.used)
    }
}

/// One vCPU quota (the region's, or the VM size family's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaRoom {
    /// What it limits, for messages (`regional vCPUs`, `standardDSv5Family vCPUs`).
    pub name: String,
    /// The limit.
    pub limit: u64,
    /// In use.
    pub used: u64,
}

impl QuotaRoom {
    /// vCPUs not in use.
    pub fn free(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

/// What one new machine takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PerMachine {
    /// Subnet addresses (one per IP configuration of its NIC; at least 1).
    pub addresses: u64,
    /// vCPUs of its size.
    pub vcpus: u64,
}

/// What is kept free: a batch never takes the last `addresses` or `vcpus`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Buffer {
    /// Subnet addresses kept free.
    #[serde(default)]
    pub addresses: u64,
    /// vCPUs kept free in every quota.
    #[serde(default)]
    pub vcpus: u64,
}

/// The room a batch is cut to.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Room {
    /// The subnet, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<SubnetRoom>,
    /// The vCPU quotas that apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotas: Vec<QuotaRoom>,
    /// What is kept free.
    #[serde(default)]
    pub buffer: Buffer,
    /// Machines already started that ARM does not count in `used` yet.
    #[serde(default)]
    pub pending: u64,
}

/// The limit that held a batch back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Limit {
    /// The subnet's free addresses.
    Subnet {
        /// The subnet.
        name: String,
        /// Free addresses, after the buffer and the pending machines.
        free: u64,
        /// Addresses the batch wanted.
        needed: u64,
    },
    /// A vCPU quota.
    Quota {
        /// The quota.
        name: String,
        /// Free vCPUs, after the buffer and the pending machines.
        free: u64,
        /// vCPUs the batch wanted.
        needed: u64,
    },
    /// The VM size is not offered here: in the whole location, or in every zone the template
    /// allows.
    Restricted {
        /// The VM size.
        size: String,
        /// The location.
        location: String,
        /// The zones restricted (empty: the whole location).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        zones: Vec<String>,
        /// Azure's reason code (`NotAvailableForSubscription`, `QuotaId`).
        reason: String,
    },
}

impl Limit {
    /// The limit in words, naming it: "subnet workers: 2 free addresses, 3 needed".
    pub fn message(&self) -> String {
        match self {
            Self::Subnet { name, free, needed } => {
                format!("subnet {name}: {free} free addresses, {needed} needed")
            }
            Self::Quota { name, free, needed } => {
                format!("quota {name}: {free} free, {needed} needed")
            }
            Self::Restricted {
                size,
                location,
                zones,
                reason,
            } if zones.is_empty() => {
                format!("size {size} is restricted in {location} ({reason})")
            }
            Self::Restricted {
                size,
                location,
                zones,
                reason,
            } => format!(
                "size {size} is restricted in every zone the template allows in {location} ({}: {reason})",
                zones.join(", ")
            ),
        }
    }

    /// The condition reason that names this limit: `SubnetFull`, `QuotaExhausted` or
    /// `SizeRestricted`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Subnet { .. } => "SubnetFull",
            Self::Quota { .. } => "QuotaExhausted",
            Self::Restricted { .. } => "SizeRestricted",
        }
    }
}

/// How much of a batch fits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fit {
    /// Machines that fit (at most those wanted).
    pub machines: u64,
    /// The tightest limit, when fewer than wanted fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
}

/// How many of `wanted` new machines, each taking `each`, fit in `room`; when fewer than
/// wanted, the limit that allows the fewest (the subnet before a quota at a tie).
pub fn fit(wanted: u64, each: PerMachine, room: &Room) -> Fit {
    let addresses = each.addresses.max(1);
    let mut fits = wanted;
    let mut limit = None;
    let mut consider = |free_total: u64, per: u64, make: &dyn Fn(u64, u64) -> Limit| {
        if per == 0 {
            return;
        }
        let free = free_total.saturating_sub(per.saturating_mul(room.pending));
        let allowed = free / per;
        if allowed < fits {
            fits = allowed;
            limit = Some(make(free, per.saturating_mul(wanted)));
        }
    };
    if let Some(subnet) = &room.subnet {
        consider(
            subnet.free().saturating_sub(room.buffer.addresses),
            addresses,
            &|free, needed| Limit::Subnet {
                name: subnet.name.clone(),
                free,
                needed,
            },
        );
    }
    for quota in &room.quotas {
        consider(
            quota.free().saturating_sub(room.buffer.vcpus),
            each.vcpus,
            &|free, needed| Limit::Quota {
                name: quota.name.clone(),
                free,
                needed,
            },
        );
    }
    Fit {
        machines: fits,
        limit,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn subnet(usable: u64, used: u64) -> SubnetRoom {
        SubnetRoom {
            name: "workers".to_owned(),
            usable,
            used,
        }
    }

    fn quota(name: &str, limit: u64, used: u64) -> QuotaRoom {
        QuotaRoom {
            name: name.to_owned(),
            limit,
            used,
        }
    }

    const D4: PerMachine = PerMachine {
        addresses: 1,
        vcpus: 4,
    };

    #[test]
    fn a_prefix_gives_its_size_less_azures_five() {
        let table = [
            (29, Some(3)),
            (24, Some(251)),
            (16, Some(65_531)),
            (32, Some(0)),
            (33, None),
        ];
        for (prefix, usable) in table {
            assert_eq!(
                SubnetRoom::from_prefix("s", prefix, 0).map(|s| s.usable),
                usable,
                "/{prefix}"
            );
        }
        assert_eq!(
            SubnetRoom::from_prefix("s", 0, 0).map(|s| s.usable),
            Some((1 << 32) - 5)
        );
    }

    #[test]
    fn the_tightest_limit_cuts_the_batch_and_is_named() {
        // (wanted, room, fits, message)
        let table = [
            (
                10,
                Room {
                    subnet: Some(subnet(3, 0)),
                    ..Room::default()
                },
                3,
                Some("subnet workers: 3 free addresses, 10 needed"),
            ),
            (
                3,
                Room {
                    subnet: Some(subnet(10, 8)),
                    quotas: vec![quota("regional vCPUs", 100, 0)],
                    ..Room::default()
                },
                2,
                Some("subnet workers: 2 free addresses, 3 needed"),
            ),
            (
                5,
                Room {
                    subnet: Some(subnet(250, 0)),
                    quotas: vec![
                        quota("regional vCPUs", 100, 90),
                        quota("standardDSv5Family vCPUs", 16, 0),
                    ],
                    ..Room::default()
                },
                2,
                Some("quota regional vCPUs: 10 free, 20 needed"),
            ),
            (
                4,
                Room {
                    subnet: Some(subnet(250, 0)),
                    quotas: vec![quota("regional vCPUs", 100, 0)],
                    ..Room::default()
                },
                4,
                None,
            ),
            (
                2,
                Room {
                    subnet: Some(subnet(5, 0)),
                    buffer: Buffer {
                        addresses: 2,
                        vcpus: 0,
                    },
                    pending: 2,
                    ..Room::default()
                },
                1,
                Some("subnet workers: 1 free addresses, 2 needed"),
            ),
            (
                1,
                Room {
                    quotas: vec![quota("regional vCPUs", 8, 10)],
                    ..Room::default()
                },
                0,
                Some("quota regional vCPUs: 0 free, 4 needed"),
            ),
            (3, Room::default(), 3, None),
        ];
        for (row, (wanted, room, fits, message)) in table.into_iter().enumerate() {
            let fit = fit(wanted, D4, &room);
            assert_eq!(fit.machines, fits, "row {row}");
            assert_eq!(
                fit.limit.as_ref().map(Limit::message).as_deref(),
                message,
                "row {row}"
            );
        }
    }

    #[test]
    fn a_nic_with_more_addresses_takes_them_all() {
        let room = Room {
            subnet: Some(subnet(10, 0)),
            ..Room::default()
        };
        let three = PerMachine {
            addresses: 3,
            vcpus: 4,
        };
        let fit = fit(5, three, &room);
        assert_eq!(fit.machines, 3);
        assert_eq!(
            fit.limit.map(|l| l.message()).as_deref(),
            Some("subnet workers: 10 free addresses, 15 needed")
        );
        let none = PerMachine {
            addresses: 0,
            vcpus: 4,
        };
        assert_eq!(
            super::fit(11, none, &room).machines,
            10,
            "at least one address"
        );
    }

    fn rooms() -> impl Strategy<Value = (Room, PerMachine, u64)> {
        (
            proptest::option::of((0u64..300, 0u64..300)),
            proptest::collection::vec((0u64..500, 0u64..500), 0..3),
            (0u64..20, 0u64..20, 0u64..10),
            (1u64..4, 0u64..65),
            0u64..50,
        )
            .prop_map(
                |(net, quotas, (ba, bv, pending), (addresses, vcpus), wanted)| {
                    let room = Room {
                        subnet: net.map(|(usable, used)| subnet(usable, used)),
                        quotas: quotas
                            .into_iter()
                            .enumerate()
                            .map(|(i, (limit, used))| quota(&format!("q{i}"), limit, used))
                            .collect(),
                        buffer: Buffer {
                            addresses: ba,
                            vcpus: bv,
                        },
                        pending,
                    };
                    (room, PerMachine { addresses, vcpus }, wanted)
                },
            )
    }

    /// Whether `n` machines (and the pending ones) fit every limit with its buffer.
    fn fits_every_limit(n: u64, each: PerMachine, room: &Room) -> bool {
        let total = n + room.pending;
        let subnet_ok = room
            .subnet
            .as_ref()
            .is_none_or(|s| total * each.addresses.max(1) + room.buffer.addresses <= s.free());
        let quotas_ok = room
            .quotas
            .iter()
            .all(|q| each.vcpus == 0 || total * each.vcpus + room.buffer.vcpus <= q.free());
        subnet_ok && quotas_ok
    }

    proptest! {
        #[test]
        fn the_batch_fits_is_as_large_as_fits_and_names_a_limit_when_cut(
            (room, each, wanted) in rooms()
        ) {
            let fit = fit(wanted, each, &room);
            prop_assert!(fit.machines <= wanted);
            if fit.machines > 0 {
                prop_assert!(fits_every_limit(fit.machines, each, &room), "{fit:?} overshoots");
            }
            if fit.machines < wanted {
                prop_assert!(!fits_every_limit(fit.machines + 1, each, &room), "{fit:?} one more fits");
                prop_assert!(fit.limit.is_some());
            } else {
                prop_assert!(fit.limit.is_none());
            }
        }

        #[test]
        fn more_buffer_or_more_pending_never_fits_more((room, each, wanted) in rooms(), more in 0u64..10) {
            let base = fit(wanted, each, &room).machines;
            let buffered = Room { buffer: Buffer { addresses: room.buffer.addresses + more, vcpus: room.buffer.vcpus + more }, ..room.clone() };
            prop_assert!(fit(wanted, each, &buffered).machines <= base);
            let pending = Room { pending: room.pending + more, ..room };
            prop_assert!(fit(wanted, each, &pending).machines <= base);
        }
    }
}
