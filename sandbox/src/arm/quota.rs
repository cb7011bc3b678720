//! What a subscription may use, as the sandbox configures it (`[quota]` in the config file,
//! `PUT /sandbox/quota` at runtime): vCPU limits per location (total regional, per size family,
//! Spot), the VM count limit, and size restrictions (`NotAvailableForSubscription`) per location
//! or zone; and how much of it a subscription uses ([`Usage::of`]).
//!
//! ```toml
//! [quota]
//! regional_vcpus = 100000        # "cores", Total Regional vCPUs, in every location
//! family_vcpus = 100000          # each family's vCPUs unless `families` names it
//! families = { standardDSv5Family = 64 }
//! low_priority_vcpus = 100000    # Spot VMs count here, not against their family
//! virtual_machines = 25000       # reported by the usages API, not enforced
//!
//! [[quota.locations]]            # one location's own limits (unset fields: the ones above)
//! location = "westeurope"
//! regional_vcpus = 16
//! families = { standardDSv5Family = 8 }
//!
//! [[quota.restrictions]]         # Standard_D2s_v5 is not available in westeurope zone 2
//! size = "Standard_D2s_v5"
//! location = "westeurope"
//! zones = ["2"]                  # absent or empty: the whole location
//! ```
//!
//! As Azure counts quota, every VM holds its size's vCPUs whatever its power state ("Quota is
//! calculated based on the total number of cores in use both allocated and deallocated",
//! Microsoft Learn, *Check vCPU quotas*): a VM being created counts at once, a deallocated VM
//! still counts, a deleted one does not.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::sizes::{self, Size};
use super::state::{Kind, State, key};

/// The default of every vCPU limit: high enough that nothing is refused unless a test asks.
pub const DEFAULT_VCPUS: u64 = 100_000;

/// The default VM count limit per location (Azure's documented maximum).
pub const DEFAULT_VIRTUAL_MACHINES: u64 = 25_000;

/// The sandbox's quota settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuotaConfig {
    /// Total regional vCPUs (`cores`) in each location.
    pub regional_vcpus: u64,
    /// Each size family's vCPUs in each location, unless `families` names the family.
    pub family_vcpus: u64,
    /// Per family (`standardDSv5Family`), its vCPUs in each location.
    pub families: BTreeMap<String, u64>,
    /// Spot vCPUs (`lowPriorityCores`) in each location.
    pub low_priority_vcpus: u64,
    /// VMs per location (reported, not enforced).
    pub virtual_machines: u64,
    /// Locations with limits of their own.
    pub locations: Vec<LocationQuota>,
    /// Sizes the subscription may not use in a location or zone.
    pub restrictions: Vec<Restriction>,
}

/// One location's own limits; an unset field takes the section's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LocationQuota {
    /// The location, e.g. `westeurope`.
    pub location: String,
    /// Total regional vCPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regional_vcpus: Option<u64>,
    /// Each family's vCPUs unless `families` names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family_vcpus: Option<u64>,
    /// Per family, its vCPUs.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub families: BTreeMap<String, u64>,
    /// Spot vCPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub low_priority_vcpus: Option<u64>,
    /// VMs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_machines: Option<u64>,
}

/// A size the subscription may not use in a location (no `zones`) or in some of its zones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Restriction {
    /// The size, e.g. `Standard_D2s_v5`.
    pub size: String,
    /// The location.
    pub location: String,
    /// The restricted zones; empty: the whole location.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
}

impl Default for QuotaConfig {
    fn default() -> Self {
        Self {
            regional_vcpus: DEFAULT_VCPUS,
            family_vcpus: DEFAULT_VCPUS,
            families: BTreeMap::new(),
            low_priority_vcpus: DEFAULT_VCPUS,
            virtual_machines: DEFAULT_VIRTUAL_MACHINES,
            locations: Vec::new(),
            restrictions: Vec::new(),
        }
    }
}

/// A setting that is not valid: the field (`restrictions[0].size`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidQuota {
    /// The field, relative to the quota section.
    pub field: String,
    /// Why.
    pub message: String,
}

/// The limits in force in one location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Total regional vCPUs.
    pub regional_vcpus: u64,
    /// Spot vCPUs.
    pub low_priority_vcpus: u64,
    /// VMs.
    pub virtual_machines: u64,
    family_vcpus: u64,
    families: BTreeMap<String, u64>,
}

impl Limits {
    /// The vCPU limit of `family`.
    pub fn family(&self, family: &str) -> u64 {
        self.families
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(family))
            .map_or(self.family_vcpus, |(_, limit)| *limit)
    }
}

/// Azure's spelling-insensitive location: `West Europe` and `westeurope` are one.
pub fn same_location(a: &str, b: &str) -> bool {
    let normal = |l: &str| -> String {
        l.chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .collect()
    };
    normal(a) == normal(b)
}

impl QuotaConfig {
    /// Checks that every family and size is one the catalog knows and every zone one it offers.
    pub fn validate(&self) -> Result<(), InvalidQuota> {
        let families = sizes::families();
        let check_families = |prefix: &str, names: &BTreeMap<String, u64>| {
            for name in names.keys() {
                if !families.iter().any(|f| f.eq_ignore_ascii_case(name)) {
                    return Err(InvalidQuota {
                        field: format!("{prefix}families.{name}"),
                        message: format!(
                            "unknown size family '{name}'; the sandbox knows {}",
                            families.join(", ")
                        ),
                    });
                }
            }
            Ok(())
        };
        check_families("", &self.families)?;
        for (i, location) in self.locations.iter().enumerate() {
            if location.location.trim().is_empty() {
                return Err(InvalidQuota {
                    field: format!("locations[{i}].location"),
                    message: "a location's limits need its name".into(),
                });
            }
            check_families(&format!("locations[{i}]."), &location.families)?;
        }
        for (i, restriction) in self.restrictions.iter().enumerate() {
            if sizes::find(&restriction.size).is_none() {
                return Err(InvalidQuota {
                    field: format!("restrictions[{i}].size"),
                    message: format!("unknown VM size '{}'", restriction.size),
                });
            }
            if restriction.location.trim().is_empty() {
                return Err(InvalidQuota {
                    field: format!("restrictions[{i}].location"),
                    message: "a restriction needs its location".into(),
                });
            }
            if let Some(zone) = restriction
                .zones
                .iter()
                .find(|z| !sizes::ZONES.contains(&z.as_str()))
            {
                return Err(InvalidQuota {
                    field: format!("restrictions[{i}].zones"),
                    message: format!("unknown zone '{zone}'; zones are 1, 2 and 3"),
                });
            }
        }
        Ok(())
    }

    /// The limits in force in `location`.
    pub fn limits(&self, location: &str) -> Limits {
        let own = self
            .locations
            .iter()
            .find(|l| same_location(&l.location, location));
        let mut families = self.families.clone();
        if let Some(own) = own {
            families.extend(own.families.clone());
        }
        Limits {
            regional_vcpus: own
                .and_then(|o| o.regional_vcpus)
                .unwrap_or(self.regional_vcpus),
            low_priority_vcpus: own
                .and_then(|o| o.low_priority_vcpus)
                .unwrap_or(self.low_priority_vcpus),
            virtual_machines: own
                .and_then(|o| o.virtual_machines)
                .unwrap_or(self.virtual_machines),
            family_vcpus: own
                .and_then(|o| o.family_vcpus)
                .unwrap_or(self.family_vcpus),
            families,
        }
    }

    /// The restrictions of `size` in `location`.
    pub fn restrictions_of<'a>(
        &'a self,
        size: &'a str,
        location: &'a str,
    ) -> impl Iterator<Item = &'a Restriction> + 'a {
        self.restrictions.iter().filter(move |r| {
            r.size.eq_ignore_ascii_case(size) && same_location(&r.location, location)
        })
    }

    /// Whether `size` is restricted in `location`, or, with a `zone`, in that zone.
    pub fn restricted(&self, size: &str, location: &str, zone: Option<&str>) -> bool {
        self.restrictions_of(size, location).any(|r| {
            r.zones.is_empty() || zone.is_some_and(|zone| r.zones.iter().any(|z| z == zone))
        })
    }
}

/// What VMs use in one subscription and location.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// vCPUs of regular (not Spot) VMs.
    pub regional_vcpus: u64,
    /// vCPUs of regular VMs per family.
    pub families: BTreeMap<&'static str, u64>,
    /// vCPUs of Spot VMs.
    pub low_priority_vcpus: u64,
    /// VMs.
    pub virtual_machines: u64,
}

/// A VM's claim on quota: its size (when the catalog knows it) and whether it is Spot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claim {
    /// The size.
    pub size: Option<&'static Size>,
    /// Whether it is a Spot VM (`priority` `Spot` or `Low`).
    pub spot: bool,
}

impl Claim {
    /// The claim of a VM body.
    pub fn of(vm: &Value) -> Self {
        let size = vm["properties"]["hardwareProfile"]["vmSize"]
            .as_str()
            .and_then(sizes::find);
        let spot = vm["properties"]["priority"]
            .as_str()
            .is_some_and(|p| p.eq_ignore_ascii_case("Spot") || p.eq_ignore_ascii_case("Low"));
        Self { size, spot }
    }
}

impl Usage {
    /// What the VMs of subscription `sub` in `location` use, leaving out the VM with id
    /// `except` (a VM being resized).
    pub fn of(state: &State, sub: &str, location: &str, except: Option<&str>) -> Self {
        let prefix = key(&format!("/subscriptions/{sub}/"));
        let except = except.map(key);
        let mut usage = Self::default();
        let vms = state
            .resources
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(k, r)| r.kind == Kind::Vm && Some(*k) != except.as_ref())
            .filter(|(_, r)| same_location(r.location(), location));
        for (_, vm) in vms {
            usage.virtual_machines += 1;
            usage.add(Claim::of(&vm.body));
        }
        usage
    }

    /// Adds a VM's claim.
    pub fn add(&mut self, claim: Claim) {
        let Some(size) = claim.size else {
            return;
        };
        let vcpus = u64::from(size.vcpus);
        if claim.spot {
            self.low_priority_vcpus += vcpus;
        } else {
            self.regional_vcpus += vcpus;
            *self.families.entry(size.family).or_default() += vcpus;
        }
    }

    /// The vCPUs regular VMs of `family` use.
    pub fn family(&self, family: &str) -> u64 {
        self.families
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(family))
            .map_or(0, |(_, used)| *used)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::arm::state::{Resource, resource_id};

    fn state(vms: &[(&str, &str, &str, Option<&str>)]) -> State {
        let mut state = State::default();
        for (name, size, location, priority) in vms {
            let id = resource_id("sub", "rg", Kind::Vm, name);
            let mut body = json!({"id": id, "location": location,
                "properties": {"hardwareProfile": {"vmSize": size}}});
            if let Some(priority) = priority {
                body["properties"]["priority"] = json!(priority);
            }
            state
                .resources
                .insert(key(&id), Resource::new(Kind::Vm, body));
        }
        state
    }

    #[test]
    fn usage_counts_each_vm_of_the_subscription_and_location_by_family_and_spot_apart() {
        let state = state(&[
            ("a", "Standard_D2s_v5", "westeurope", None),
            ("b", "Standard_D4s_v5", "West Europe", None),
            ("c", "Standard_B2s", "westeurope", None),
            ("d", "Standard_D8s_v5", "westeurope", Some("Spot")),
            ("e", "Standard_D2s_v5", "northeurope", None),
            ("f", "Standard_Unknown", "westeurope", None),
        ]);
        let usage = Usage::of(&state, "SUB", "westeurope", None);
        assert_eq!(usage.virtual_machines, 5);
        assert_eq!(usage.regional_vcpus, 8);
        assert_eq!(usage.family("standardDSv5Family"), 6);
        assert_eq!(usage.family("standardBSFamily"), 2);
        assert_eq!(usage.family("standardESv5Family"), 0);
        assert_eq!(usage.low_priority_vcpus, 8);
        let without_b = Usage::of(
            &state,
            "sub",
            "westeurope",
            Some(&resource_id("sub", "rg", Kind::Vm, "B")),
        );
        assert_eq!(without_b.regional_vcpus, 4);
        assert_eq!(
            Usage::of(&state, "other", "westeurope", None),
            Usage::default()
        );
    }

    #[test]
    fn a_locations_own_limits_override_the_sections_and_unset_ones_inherit() {
        let config: QuotaConfig = toml::from_str(
            r#"
            regional_vcpus = 100
            families = { standardDSv5Family = 20 }
            [[locations]]
            location = "westeurope"
            regional_vcpus = 10
            families = { standardBSFamily = 4 }
            "#,
        )
        .expect("parses");
        assert_eq!(config.validate(), Ok(()));
        let west = config.limits("West Europe");
        assert_eq!(west.regional_vcpus, 10);
        assert_eq!(west.family("standardDSv5Family"), 20);
        assert_eq!(west.family("standardbsfamily"), 4);
        assert_eq!(west.family("standardESv5Family"), DEFAULT_VCPUS);
        let north = config.limits("northeurope");
        assert_eq!(north.regional_vcpus, 100);
        assert_eq!(north.family("standardBSFamily"), DEFAULT_VCPUS);
        assert_eq!(north.virtual_machines, DEFAULT_VIRTUAL_MACHINES);
    }

    #[test]
    fn restrictions_hold_in_their_zones_or_the_whole_location() {
        let config = QuotaConfig {
            restrictions: vec![
                Restriction {
                    size: "Standard_D2s_v5".into(),
                    location: "westeurope".into(),
                    zones: vec!["2".into()],
                },
                Restriction {
                    size: "Standard_B2s".into(),
                    location: "northeurope".into(),
                    zones: Vec::new(),
                },
            ],
            ..QuotaConfig::default()
        };
        assert_eq!(config.validate(), Ok(()));
        assert!(config.restricted("standard_d2s_v5", "westeurope", Some("2")));
        assert!(!config.restricted("Standard_D2s_v5", "westeurope", Some("1")));
        assert!(!config.restricted("Standard_D2s_v5", "westeurope", None));
        assert!(config.restricted("Standard_B2s", "northeurope", None));
        assert!(config.restricted("Standard_B2s", "northeurope", Some("3")));
        assert!(!config.restricted("Standard_B2s", "westeurope", Some("3")));
    }

    #[test]
    fn unknown_families_sizes_and_zones_are_refused_naming_the_field() {
        let check = |text: &str| {
            toml::from_str::<QuotaConfig>(text)
                .expect("parses")
                .validate()
                .map_err(|e| e.field)
        };
        assert_eq!(
            check("families = { standardNopeFamily = 1 }"),
            Err("families.standardNopeFamily".to_owned())
        );
        assert_eq!(
            check("[[restrictions]]\nsize = \"Standard_Huge\"\nlocation = \"westeurope\""),
            Err("restrictions[0].size".to_owned())
        );
        assert_eq!(
            check(
                "[[restrictions]]\nsize = \"Standard_B2s\"\nlocation = \"westeurope\"\nzones = [\"4\"]"
            ),
            Err("restrictions[0].zones".to_owned())
        );
        assert_eq!(
            check("[[locations]]\nregional_vcpus = 3"),
            Err("locations[0].location".to_owned())
        );
        assert!(toml::from_str::<QuotaConfig>("nonsense = 1").is_err());
    }
}
