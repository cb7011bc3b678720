//! What a headroom read asks ARM ([`HeadroomQuestion`]: a template's subnet, VM size and
//! zones), what it found ([`HeadroomReading`]: the subnet's usage, the vCPU quotas that apply,
//! the size's vCPUs and its restrictions), and the decision for one batch of creates
//! ([`cut`]): how many fit, in which zones, and the limit that held the rest back.
//!
//! A size restricted in the whole location, or in every zone the template allows, fits no
//! machine ([`Limit::Restricted`]); a zone where only some are restricted is skipped, with
//! Azure's reason, and the batch goes to the others.

use serde::{Deserialize, Serialize};

use super::{Buffer, Limit, PerMachine, QuotaRoom, Room, SubnetRoom, fit};

/// Where a batch of machines of one template would go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeadroomQuestion {
    /// The template's subnet (ARM id).
    pub subnet_id: String,
    /// The template's VM size.
    pub vm_size: String,
    /// The zones the template allows (empty: a regional pool).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
}

/// A restriction Azure lists for the size in the location (the SKU's `restrictions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Restriction {
    /// The zones restricted; empty: the whole location.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// Azure's reason code (`NotAvailableForSubscription`, `QuotaId`).
    pub reason: String,
}

/// What ARM said about the room for a [`HeadroomQuestion`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeadroomReading {
    /// The location read.
    pub location: String,
    /// The subnet's usage; none when the virtual network's usages do not list it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<SubnetRoom>,
    /// The vCPU quotas that apply to the size (the region's and the size family's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotas: Vec<QuotaRoom>,
    /// vCPUs of one machine of the size (from the SKUs).
    pub vcpus: u64,
    /// The size's restrictions in the location.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restrictions: Vec<Restriction>,
}

/// A zone of the template that a batch does not use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedZone {
    /// The zone.
    pub zone: String,
    /// Azure's reason code for the restriction.
    pub reason: String,
}

/// One batch cut to its headroom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cut {
    /// Machines to create now (at most those wanted).
    pub machines: u32,
    /// The zones they may go to: the template's less the restricted ones (empty: regional).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// The template's zones left out, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedZone>,
    /// The limit that held machines back, when fewer than wanted fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
}

impl HeadroomReading {
    /// The room for a batch, keeping `buffer` free, after `pending` machines already started.
    pub fn room(&self, buffer: Buffer, pending: u32) -> Room {
        Room {
            subnet: self.subnet.clone(),
            quotas: self.quotas.clone(),
            buffer,
            pending: u64::from(pending),
        }
    }

    /// The first restriction of the whole location, if any.
    fn location_restriction(&self) -> Option<&Restriction> {
        self.restrictions.iter().find(|r| r.zones.is_empty())
    }

    /// Why `zone` is restricted, if it is.
    fn zone_restriction(&self, zone: &str) -> Option<&Restriction> {
        self.restrictions
            .iter()
            .find(|r| r.zones.iter().any(|z| z == zone))
    }
}

/// How many of `wanted` new machines of `question`'s template start now: none when the size is
/// restricted in the location or in every allowed zone, else as many as the subnet and the
/// quotas leave room for after `pending` machines and the `buffer` ([`fit`]); restricted
/// zones are skipped with their reason.
pub fn cut(
    wanted: u32,
    question: &HeadroomQuestion,
    reading: &HeadroomReading,
    buffer: Buffer,
    pending: u32,
) -> Cut {
    let restricted = |zones: Vec<String>, reason: &str| Limit::Restricted {
        size: question.vm_size.clone(),
        location: reading.location.clone(),
        zones,
        reason: reason.to_owned(),
    };
    if let Some(whole) = reading.location_restriction() {
        return Cut {
            machines: 0,
            zones: Vec::new(),
            skipped: Vec::new(),
            limit: (wanted > 0).then(|| restricted(Vec::new(), &whole.reason)),
        };
    }
    let mut zones = Vec::new();
    let mut skipped = Vec::new();
    for zone in &question.zones {
        match reading.zone_restriction(zone) {
            Some(restriction) => skipped.push(SkippedZone {
                zone: zone.clone(),
                reason: restriction.reason.clone(),
            }),
            None => zones.push(zone.clone()),
        }
    }
    if !question.zones.is_empty() && zones.is_empty() {
        let reason = skipped
            .first()
            .map(|s| s.reason.clone())
            .unwrap_or_default();
        let limit = (wanted > 0).then(|| restricted(question.zones.clone(), &reason));
        return Cut {
            machines: 0,
            zones,
            skipped,
            limit,
        };
    }
    let each = PerMachine {
        addresses: 1,
        vcpus: reading.vcpus,
    };
    let fitted = fit(u64::from(wanted), each, &reading.room(buffer, pending));
    Cut {
        machines: u32::try_from(fitted.machines).unwrap_or(wanted),
        zones,
        skipped,
        limit: fitted.limit,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn question(zones: &[&str]) -> HeadroomQuestion {
        HeadroomQuestion {
            subnet_id: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/workers".to_owned(),
            vm_size: "Standard_D4s_v5".to_owned(),
            zones: zones.iter().map(|z| (*z).to_owned()).collect(),
        }
    }

    fn reading(
        free_addresses: u64,
        free_vcpus: u64,
        restrictions: Vec<Restriction>,
    ) -> HeadroomReading {
        HeadroomReading {
            location: "westeurope".to_owned(),
            subnet: Some(SubnetRoom {
                name: "workers".to_owned(),
                usable: free_addresses + 10,
                used: 10,
            }),
            quotas: vec![QuotaRoom {
                name: "standardDSv5Family vCPUs".to_owned(),
                limit: free_vcpus,
                used: 0,
            }],
            vcpus: 4,
            restrictions,
        }
    }

    fn restriction(zones: &[&str]) -> Restriction {
        Restriction {
            zones: zones.iter().map(|z| (*z).to_owned()).collect(),
            reason: "NotAvailableForSubscription".to_owned(),
        }
    }

    #[test]
    fn a_batch_is_cut_to_the_tightest_room_and_restricted_zones_are_skipped() {
        // (wanted, zones, free addresses, free vCPUs, restrictions, pending) →
        // (machines, zones used, skipped, message)
        type Row<'a> = (
            u32,
            &'a [&'a str],
            u64,
            u64,
            Vec<Restriction>,
            u32,
            u32,
            &'a [&'a str],
            &'a [&'a str],
            Option<&'a str>,
        );
        let table: [Row<'_>; 6] = [
            (
                10,
                &["1", "2", "3"],
                3,
                1000,
                vec![],
                0,
                3,
                &["1", "2", "3"],
                &[],
                Some("subnet workers: 3 free addresses, 10 needed"),
            ),
            (
                10,
                &["1", "2", "3"],
                3,
                1000,
                vec![],
                1,
                2,
                &["1", "2", "3"],
                &[],
                Some("subnet workers: 2 free addresses, 10 needed"),
            ),
            (
                3,
                &[],
                100,
                8,
                vec![],
                0,
                2,
                &[],
                &[],
                Some("quota standardDSv5Family vCPUs: 8 free, 12 needed"),
            ),
            (
                2,
                &["1", "2", "3"],
                100,
                1000,
                vec![restriction(&["2"])],
                0,
                2,
                &["1", "3"],
                &["2"],
                None,
            ),
            (
                2,
                &["1", "2"],
                100,
                1000,
                vec![restriction(&["1", "2"])],
                0,
                0,
                &[],
                &["1", "2"],
                Some(
                    "size Standard_D4s_v5 is restricted in every zone the template allows in westeurope (1, 2: NotAvailableForSubscription)",
                ),
            ),
            (
                2,
                &["1"],
                100,
                1000,
                vec![restriction(&[])],
                0,
                0,
                &[],
                &[],
                Some(
                    "size Standard_D4s_v5 is restricted in westeurope (NotAvailableForSubscription)",
                ),
            ),
        ];
        for (
            row,
            (
                wanted,
                zones,
                addresses,
                vcpus,
                restrictions,
                pending,
                machines,
                used,
                skipped,
                message,
            ),
        ) in table.into_iter().enumerate()
        {
            let cut = cut(
                wanted,
                &question(zones),
                &reading(addresses, vcpus, restrictions),
                Buffer::default(),
                pending,
            );
            assert_eq!(cut.machines, machines, "row {row}");
            assert_eq!(
                cut.zones,
                used.iter().map(|z| (*z).to_owned()).collect::<Vec<_>>(),
                "row {row}"
            );
            assert_eq!(
                cut.skipped
                    .iter()
                    .map(|s| s.zone.as_str())
                    .collect::<Vec<_>>(),
                skipped.to_vec(),
                "row {row}"
            );
            assert_eq!(
                cut.limit.as_ref().map(Limit::message).as_deref(),
                message,
                "row {row}"
            );
        }
    }

    #[test]
    fn each_limit_has_its_condition_reason() {
        let subnet = cut(
            5,
            &question(&[]),
            &reading(0, 1000, vec![]),
            Buffer::default(),
            0,
        );
        let quota = cut(
            5,
            &question(&[]),
            &reading(100, 0, vec![]),
            Buffer::default(),
            0,
        );
        let size = cut(
            5,
            &question(&[]),
            &reading(100, 1000, vec![restriction(&[])]),
            Buffer::default(),
            0,
        );
        let reasons: Vec<_> = [subnet, quota, size]
            .iter()
            .map(|c| c.limit.as_ref().map(Limit::reason))
            .collect();
        assert_eq!(
            reasons,
            [
                Some("SubnetFull"),
                Some("QuotaExhausted"),
                Some("SizeRestricted")
            ]
        );
    }

    #[test]
    fn nothing_wanted_names_no_limit_even_when_restricted() {
        let cut = cut(
            0,
            &question(&["1"]),
            &reading(0, 0, vec![restriction(&[])]),
            Buffer::default(),
            0,
        );
        assert_eq!((cut.machines, cut.limit), (0, None));
    }

    proptest! {
        #[test]
        fn a_cut_never_exceeds_the_wish_nor_uses_a_restricted_zone(
            wanted in 0u32..40,
            addresses in 0u64..50,
            vcpus in 0u64..200,
            pending in 0u32..10,
            restricted in proptest::collection::btree_set(prop_oneof![Just("1"), Just("2"), Just("3")], 0..4),
        ) {
            let restricted: Vec<&str> = restricted.into_iter().collect();
            let restrictions = if restricted.is_empty() { vec![] } else { vec![restriction(&restricted)] };
            let cut = cut(wanted, &question(&["1", "2", "3"]), &reading(addresses, vcpus, restrictions), Buffer::default(), pending);
            prop_assert!(cut.machines <= wanted);
            prop_assert!(cut.zones.iter().all(|z| !restricted.contains(&z.as_str())));
            prop_assert_eq!(cut.zones.len() + cut.skipped.len(), 3);
            prop_assert!(u64::from(cut.machines + pending) <= addresses || cut.machines == 0);
            prop_assert!(u64::from(cut.machines + pending) * 4 <= vcpus || cut.machines == 0);
            if cut.machines < wanted {
                prop_assert!(cut.limit.is_some());
            }
        }
    }
}
