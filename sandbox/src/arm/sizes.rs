//! The VM sizes the emulator knows, as Azure describes them in its resource SKUs and counts them
//! in its quotas: each size's vCPU quota family (`standardDSv5Family`), vCPUs, memory, data-disk
//! slots, premium storage and CPU architecture. Every size is offered in every location, in
//! zones 1, 2 and 3 ([`ZONES`]); what a subscription may not use comes from the quota
//! configuration (`quota.rs`).
//!
//! The catalog holds the sizes nodewright's tests, examples and docs name, with their neighbours
//! in the same families; a size outside it is refused at a VM create or resize as Azure refuses a
//! size it does not have (400 `InvalidParameter`).

/// One VM size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size {
    /// The size's name, `Standard_D2s_v5`.
    pub name: &'static str,
    /// The vCPU quota family it counts against, as the usages API names it
    /// (`standardDSv5Family`).
    pub family: &'static str,
    /// vCPUs.
    pub vcpus: u32,
    /// Memory in GiB.
    pub memory_gb: f64,
    /// How many data disks it takes.
    pub max_data_disks: u32,
    /// Whether it takes premium storage (`Premium_LRS`, `Premium_ZRS` disks).
    pub premium_io: bool,
    /// `x64` or `Arm64`.
    pub architecture: &'static str,
}

/// The availability zones every size is offered in, in every location.
pub const ZONES: [&str; 3] = ["1", "2", "3"];

/// The locations a SKU list without a location filter names (every location exists in the
/// emulator; a filter may name any of them).
pub const LOCATIONS: [&str; 8] = [
    "centralus",
    "eastus",
    "eastus2",
    "northeurope",
    "swedencentral",
    "uksouth",
    "westeurope",
    "westus2",
];

const fn size(
    name: &'static str,
    family: &'static str,
    vcpus: u32,
    memory_gb: f64,
    max_data_disks: u32,
    premium_io: bool,
) -> Size {
    Size {
        name,
        family,
        vcpus,
        memory_gb,
        max_data_disks,
        premium_io,
        architecture: "x64",
    }
}

/// Every size the emulator knows, by family.
pub const CATALOG: &[Size] = &[
    size("Standard_A2_v2", "standardAv2Family", 2, 4.0, 4, false),
    size("Standard_A2m_v2", "standardAv2Family", 2, 16.0, 4, false),
    size("Standard_B1ls", "standardBSFamily", 1, 0.5, 2, true),
    size("Standard_B1s", "standardBSFamily", 1, 1.0, 2, true),
    size("Standard_B1ms", "standardBSFamily", 1, 2.0, 2, true),
    size("Standard_B2s", "standardBSFamily", 2, 4.0, 4, true),
    size("Standard_B2ms", "standardBSFamily", 2, 8.0, 4, true),
    size("Standard_B4ms", "standardBSFamily", 4, 16.0, 8, true),
    size("Standard_B8ms", "standardBSFamily", 8, 32.0, 16, true),
    size("Standard_D1_v2", "standardDv2Family", 1, 3.5, 4, false),
    size("Standard_D2_v2", "standardDv2Family", 2, 7.0, 8, false),
    size("Standard_DS1_v2", "standardDSv2Family", 1, 3.5, 4, true),
    size("Standard_DS2_v2", "standardDSv2Family", 2, 7.0, 8, true),
    size("Standard_DS3_v2", "standardDSv2Family", 4, 14.0, 16, true),
    size("Standard_D2_v3", "standardDv3Family", 2, 8.0, 4, false),
    size("Standard_D4_v3", "standardDv3Family", 4, 16.0, 8, false),
    size("Standard_D2s_v3", "standardDSv3Family", 2, 8.0, 4, true),
    size("Standard_D4s_v3", "standardDSv3Family", 4, 16.0, 8, true),
    size("Standard_D8s_v3", "standardDSv3Family", 8, 32.0, 16, true),
    size("Standard_D16s_v3", "standardDSv3Family", 16, 64.0, 32, true),
    size("Standard_D2a_v4", "standardDAv4Family", 2, 8.0, 4, false),
    size("Standard_D2as_v4", "standardDASv4Family", 2, 8.0, 4, true),
    size("Standard_D2_v5", "standardDv5Family", 2, 8.0, 4, false),
    size("Standard_D4_v5", "standardDv5Family", 4, 16.0, 8, false),
    size("Standard_D8_v5", "standardDv5Family", 8, 32.0, 16, false),
    size("Standard_D2s_v5", "standardDSv5Family", 2, 8.0, 4, true),
    size("Standard_D4s_v5", "standardDSv5Family", 4, 16.0, 8, true),
    size("Standard_D8s_v5", "standardDSv5Family", 8, 32.0, 16, true),
    size("Standard_D16s_v5", "standardDSv5Family", 16, 64.0, 32, true),
    size(
        "Standard_D32s_v5",
        "standardDSv5Family",
        32,
        128.0,
        32,
        true,
    ),
    size("Standard_D2ds_v5", "standardDDSv5Family", 2, 8.0, 4, true),
    size("Standard_D4ds_v5", "standardDDSv5Family", 4, 16.0, 8, true),
    Size {
        architecture: "Arm64",
        ..size("Standard_D2pls_v5", "standardDPLSv5Family", 2, 4.0, 4, true)
    },
    size("Standard_DC2s_v2", "standardDCSv2Family", 2, 8.0, 2, true),
    size("Standard_E2_v3", "standardEv3Family", 2, 16.0, 4, false),
    size("Standard_E2s_v5", "standardESv5Family", 2, 16.0, 4, true),
    size("Standard_E4s_v5", "standardESv5Family", 4, 32.0, 8, true),
    size("Standard_E8s_v5", "standardESv5Family", 8, 64.0, 16, true),
    size(
        "Standard_E64s_v5",
        "standardESv5Family",
        64,
        512.0,
        32,
        true,
    ),
    size("Standard_E4ds_v5", "standardEDSv5Family", 4, 32.0, 8, true),
    size(
        "Standard_E4bds_v5",
        "standardEBDSv5Family",
        4,
        32.0,
        8,
        true,
    ),
    size("Standard_F4", "standardFFamily", 4, 8.0, 16, false),
    size("Standard_F2s_v2", "standardFSv2Family", 2, 4.0, 4, true),
    size("Standard_F4s_v2", "standardFSv2Family", 4, 8.0, 8, true),
    size("Standard_GS1", "standardGSFamily", 2, 28.0, 8, true),
    size(
        "Standard_HB120rs_v3",
        "standardHBrsv3Family",
        120,
        448.0,
        32,
        true,
    ),
    size("Standard_L8s_v3", "standardLSv3Family", 8, 64.0, 16, true),
    size("Standard_M64", "standardMSFamily", 64, 1024.0, 64, true),
    size(
        "Standard_NC6s_v3",
        "standardNCSv3Family",
        6,
        112.0,
        12,
        true,
    ),
    size("Standard_NV6", "standardNVFamily", 6, 56.0, 24, false),
];

/// The size named `name` (case-insensitively, as Azure reads sizes).
pub fn find(name: &str) -> Option<&'static Size> {
    CATALOG.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// The families of the catalog, each once, in catalog order.
pub fn families() -> Vec<&'static str> {
    let mut families: Vec<&'static str> = Vec::new();
    for size in CATALOG {
        if !families.contains(&size.family) {
            families.push(size.family);
        }
    }
    families
}

/// How the usages API names a family's quota for people: `standardDSv5Family` → "Standard DSv5
/// Family vCPUs".
pub fn family_display_name(family: &str) -> String {
    let core = family
        .strip_prefix("standard")
        .and_then(|f| f.strip_suffix("Family"))
        .unwrap_or(family);
    format!("Standard {} Family vCPUs", core.replace('_', "-"))
}

impl Size {
    /// The size's short name as the SKU list gives it: `Standard_D2s_v5` → `D2s_v5`.
    pub fn short_name(&self) -> &'static str {
        self.name.strip_prefix("Standard_").unwrap_or(self.name)
    }

    /// The family's pricing row ([`PRICES`]); a family missing there is priced as
    /// general-purpose.
    fn pricing(&self) -> &'static Pricing {
        PRICES
            .iter()
            .find(|p| p.family == self.family)
            .unwrap_or(&DEFAULT_PRICING)
    }

    /// The pay-as-you-go (on-demand) price in USD per hour, Linux: the family's rate per vCPU
    /// times the vCPUs, rounded to 5 decimals as Azure's price sheet writes prices.
    pub fn on_demand_price(&self) -> f64 {
        round5(self.pricing().usd_per_vcpu_hour * f64::from(self.vcpus))
    }

    /// Whether Azure offers the size as a Spot VM (not the burstable B-series, nor the sizes
    /// [`PRICES`] marks).
    pub fn supports_spot(&self) -> bool {
        self.pricing().spot_fraction.is_some()
    }

    /// The catalog's Spot price in USD per hour (the on-demand price times the family's Spot
    /// fraction), `None` for a size without Spot. The price in force may differ
    /// (`PUT /sandbox/spot-prices`).
    pub fn spot_price(&self) -> Option<f64> {
        let fraction = self.pricing().spot_fraction?;
        Some(round5(self.on_demand_price() * fraction))
    }
}

/// What a family costs: the on-demand rate per vCPU and the share of it a Spot VM pays
/// (`None`: no Spot for the family).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pricing {
    /// The vCPU quota family.
    pub family: &'static str,
    /// On-demand USD per vCPU and hour (Linux, West Europe's order of magnitude).
    pub usd_per_vcpu_hour: f64,
    /// A Spot VM's price as a share of the on-demand price; `None` when the family has no Spot.
    pub spot_fraction: Option<f64>,
}

const fn priced(family: &'static str, usd_per_vcpu_hour: f64, spot: Option<f64>) -> Pricing {
    Pricing {
        family,
        usd_per_vcpu_hour,
        spot_fraction: spot,
    }
}

/// A family [`PRICES`] does not list.
const DEFAULT_PRICING: Pricing = priced("", 0.05, Some(0.2));

/// Plausible prices per family (the sandbox's figures, near Azure's public Linux prices; no
/// Spot for the burstable B-series, as in Azure, nor for confidential DCsv2).
pub const PRICES: &[Pricing] = &[
    priced("standardAv2Family", 0.046, Some(0.2)),
    priced("standardBSFamily", 0.0416, None),
    priced("standardDv2Family", 0.067, Some(0.2)),
    priced("standardDSv2Family", 0.067, Some(0.2)),
    priced("standardDv3Family", 0.048, Some(0.2)),
    priced("standardDSv3Family", 0.048, Some(0.2)),
    priced("standardDAv4Family", 0.048, Some(0.2)),
    priced("standardDASv4Family", 0.048, Some(0.2)),
    priced("standardDv5Family", 0.048, Some(0.2)),
    priced("standardDSv5Family", 0.048, Some(0.2)),
    priced("standardDDSv5Family", 0.0565, Some(0.2)),
    priced("standardDPLSv5Family", 0.0339, Some(0.2)),
    priced("standardDCSv2Family", 0.11, None),
    priced("standardEv3Family", 0.063, Some(0.2)),
    priced("standardESv5Family", 0.063, Some(0.2)),
    priced("standardEDSv5Family", 0.072, Some(0.2)),
    priced("standardEBDSv5Family", 0.0875, Some(0.2)),
    priced("standardFFamily", 0.0497, Some(0.25)),
    priced("standardFSv2Family", 0.0423, Some(0.25)),
    priced("standardGSFamily", 0.17, Some(0.3)),
    priced("standardHBrsv3Family", 0.03, Some(0.4)),
    priced("standardLSv3Family", 0.078, Some(0.2)),
    priced("standardMSFamily", 0.14, Some(0.3)),
    priced("standardNCSv3Family", 0.51, Some(0.3)),
    priced("standardNVFamily", 0.19, Some(0.3)),
];

/// `value` rounded to 5 decimals.
pub fn round5(value: f64) -> f64 {
    (value * 100_000.0).round() / 100_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_names_each_size_once_with_a_standard_family() {
        for (i, size) in CATALOG.iter().enumerate() {
            assert!(size.name.starts_with("Standard_"), "{}", size.name);
            assert!(
                size.family.starts_with("standard") && size.family.ends_with("Family"),
                "{}",
                size.family
            );
            assert!(size.vcpus > 0 && size.memory_gb > 0.0, "{}", size.name);
            assert!(
                CATALOG[..i]
                    .iter()
                    .all(|other| !other.name.eq_ignore_ascii_case(size.name)),
                "{} twice",
                size.name
            );
        }
    }

    #[test]
    fn sizes_are_found_in_any_case_and_unknown_ones_are_not() {
        let found = find("standard_d2S_V5").expect("known");
        assert_eq!(found.name, "Standard_D2s_v5");
        assert_eq!(found.family, "standardDSv5Family");
        assert_eq!((found.vcpus, found.short_name()), (2, "D2s_v5"));
        assert!(find("Standard_Huge").is_none());
        assert!(find("").is_none());
    }

    #[test]
    fn the_sizes_nodewrights_tests_use_are_known() {
        for name in [
            "Standard_D2s_v5",
            "Standard_D4s_v5",
            "Standard_D8s_v5",
            "Standard_D16s_v5",
            "Standard_D2_v5",
            "Standard_B2s",
            "Standard_B2ms",
            "Standard_E4s_v5",
            "Standard_F4s_v2",
        ] {
            assert!(find(name).is_some(), "{name}");
        }
    }

    #[test]
    fn every_size_has_an_on_demand_price_and_spot_is_cheaper_where_offered() {
        for size in CATALOG {
            let on_demand = size.on_demand_price();
            assert!(on_demand > 0.0, "{}", size.name);
            match size.spot_price() {
                Some(spot) => assert!(spot > 0.0 && spot < on_demand, "{}", size.name),
                None => assert!(!size.supports_spot(), "{}", size.name),
            }
        }
        let d4 = find("Standard_D4s_v5").expect("known");
        assert_eq!(d4.on_demand_price(), 0.192);
        assert_eq!(d4.spot_price(), Some(0.0384));
        assert!(!find("Standard_B2s").expect("known").supports_spot());
        assert!(PRICES.iter().all(|p| families().contains(&p.family)));
    }

    #[test]
    fn family_names_read_as_the_usages_api_writes_them() {
        assert_eq!(
            family_display_name("standardDSv5Family"),
            "Standard DSv5 Family vCPUs"
        );
        assert_eq!(
            family_display_name("standardBSFamily"),
            "Standard BS Family vCPUs"
        );
        assert_eq!(
            family_display_name("standardA0_A7Family"),
            "Standard A0-A7 Family vCPUs"
        );
        let families = families();
        assert!(families.contains(&"standardDSv5Family"));
        let unique: std::collections::BTreeSet<&str> = families.iter().copied().collect();
        assert_eq!(unique.len(), families.len(), "each family once");
        assert!(CATALOG.iter().all(|s| families.contains(&s.family)));
    }
}
