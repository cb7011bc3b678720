//! Capacity types: whether a machine is an on-demand VM or a Spot VM (Azure's spare capacity,
//! cheaper, and taken back with a short notice), the pool template's Spot settings, and what a
//! machine of each type carries: the VM body's priority, eviction policy and maximum price, the
//! Node's `nodewright.io/capacity-type` label and, on request, AKS's Spot label and taint.
//!
//! A template lists the types its machines may be in order of preference
//! (`capacityTypes: [spot, on-demand]`); each machine is one of them, chosen when it is created
//! (the first the offerings allow, [`crate::capacity`]), and keeps it: a machine made on-demand
//! because Spot had no room is not out of date.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::spec::{MachineTemplate, TaintSpec};

/// Node label and VM tag value: the machine's capacity type (as Karpenter's
/// `karpenter.sh/capacity-type`).
pub const LABEL_CAPACITY_TYPE: &str = "nodewright.io/capacity-type";

/// VM tag: the machine's capacity type (tag names cannot hold `/`).
pub const TAG_CAPACITY_TYPE: &str = "nodewright.io-capacity-type";

/// AKS's label (and taint key) of Spot nodes, for workloads written for AKS's Spot pools.
pub const AKS_SPOT_LABEL: &str = "kubernetes.azure.com/scalesetpriority";

/// The value of [`AKS_SPOT_LABEL`] on a Spot node.
pub const AKS_SPOT_VALUE: &str = "spot";

/// The maximum price meaning "never evicted for price; pay at most the on-demand price".
pub const NO_MAX_PRICE: f64 = -1.0;

/// The highest maximum price a template may set, USD an hour: far above any VM's on-demand
/// price, so that a typo (a price in cents) is caught rather than sent.
pub const MAX_MAX_PRICE: f64 = 1000.0;

/// The most decimals Azure keeps of a maximum price.
pub const MAX_PRICE_DECIMALS: u32 = 5;

/// What kind of VM a machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityType {
    /// A regular VM, paid by the hour, never evicted.
    OnDemand,
    /// A Spot VM: spare capacity, evicted when Azure needs it back (or its price passes the
    /// maximum), with a notice of 30 s at best.
    Spot,
}

impl CapacityType {
    /// The name as pool files, labels and tags write it: `on-demand` or `spot`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnDemand => "on-demand",
            Self::Spot => "spot",
        }
    }

    /// Reads a label or tag value ([`Self::as_str`]; case-insensitive).
    pub fn parse(text: &str) -> Option<Self> {
        [Self::OnDemand, Self::Spot]
            .into_iter()
            .find(|kind| kind.as_str().eq_ignore_ascii_case(text.trim()))
    }
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What Azure does with an evicted Spot VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum EvictionPolicy {
    /// The VM and its disks are deleted (nodewright's default, as Karpenter's: nothing is left
    /// to pay for, and the pool's replacement is a new machine anyway).
    #[default]
    Delete,
    /// The VM is stopped and deallocated: it keeps its disks (still paid for) and its quota,
    /// and nodewright removes it when it replaces the machine.
    Deallocate,
}

impl EvictionPolicy {
    /// The name Azure writes in `properties.evictionPolicy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "Delete",
            Self::Deallocate => "Deallocate",
        }
    }
}

/// A template's Spot settings (`spec.template.spot`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpotSpec {
    /// The most the pool pays for a Spot VM, USD an hour, at most 5 decimals; `-1` (the
    /// default) never evicts for price and pays at most the on-demand price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_price: Option<serde_json::Number>,
    /// What Azure does with an evicted VM: `Delete` (the default) or `Deallocate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_policy: Option<EvictionPolicy>,
    /// Also give Spot nodes AKS's label and taint `kubernetes.azure.com/scalesetpriority=spot`
    /// (`NoSchedule`), for workloads written for AKS's Spot pools.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub aks_labels: bool,
}

impl SpotSpec {
    /// The maximum price sent to Azure (-1 unless set).
    pub fn max_price(&self) -> f64 {
        self.max_price
            .as_ref()
            .and_then(serde_json::Number::as_f64)
            .unwrap_or(NO_MAX_PRICE)
    }

    /// The eviction policy sent to Azure (Delete unless set).
    pub fn eviction_policy(&self) -> EvictionPolicy {
        self.eviction_policy.unwrap_or_default()
    }
}

impl MachineTemplate {
    /// The capacity types the template allows, in order of preference: as written, else
    /// on-demand only.
    pub fn allowed_capacity_types(&self) -> Vec<CapacityType> {
        if self.capacity_types.is_empty() {
            vec![CapacityType::OnDemand]
        } else {
            self.capacity_types.clone()
        }
    }

    /// The type a machine is made as when nothing else decides: the template's first.
    pub fn preferred_capacity_type(&self) -> CapacityType {
        self.capacity_types
            .first()
            .copied()
            .unwrap_or(CapacityType::OnDemand)
    }

    /// The template's Spot settings, defaulted.
    pub fn spot_settings(&self) -> SpotSpec {
        self.spot.clone().unwrap_or_default()
    }
}

/// The Node labels a machine of `capacity` gets besides the template's: its capacity type, and
/// for Spot with `aksLabels`, AKS's Spot label.
pub fn capacity_labels(
    template: &MachineTemplate,
    capacity: CapacityType,
) -> Vec<(String, String)> {
    let mut labels = vec![(LABEL_CAPACITY_TYPE.to_owned(), capacity.as_str().to_owned())];
    if capacity == CapacityType::Spot && template.spot_settings().aks_labels {
        labels.push((AKS_SPOT_LABEL.to_owned(), AKS_SPOT_VALUE.to_owned()));
    }
    labels
}

/// The taints a machine of `capacity` gets besides the template's: for Spot with `aksLabels`,
/// AKS's `kubernetes.azure.com/scalesetpriority=spot:NoSchedule`, unless the template already
/// has a taint of that key and effect.
pub fn capacity_taints(template: &MachineTemplate, capacity: CapacityType) -> Vec<TaintSpec> {
    let wanted = capacity == CapacityType::Spot && template.spot_settings().aks_labels;
    let written = template
        .taints
        .iter()
        .any(|t| t.key == AKS_SPOT_LABEL && t.effect == "NoSchedule");
    if wanted && !written {
        vec![TaintSpec {
            key: AKS_SPOT_LABEL.to_owned(),
            value: AKS_SPOT_VALUE.to_owned(),
            effect: "NoSchedule".to_owned(),
        }]
    } else {
        Vec::new()
    }
}

/// The taints a machine of `capacity` gets: the template's, then [`capacity_taints`].
pub fn machine_taints(template: &MachineTemplate, capacity: CapacityType) -> Vec<TaintSpec> {
    let mut taints = template.taints.clone();
    taints.extend(capacity_taints(template, capacity));
    taints
}

/// Whether `price` (USD an hour) has at most [`MAX_PRICE_DECIMALS`] decimals.
pub fn has_price_precision(price: f64) -> bool {
    let scaled = price * 100_000.0;
    (scaled - scaled.round()).abs() < 1e-6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_unknown_ones_are_refused() {
        for kind in [CapacityType::OnDemand, CapacityType::Spot] {
            assert_eq!(CapacityType::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(CapacityType::parse(" Spot "), Some(CapacityType::Spot));
        assert_eq!(CapacityType::parse("regular"), None);
    }

    #[test]
    fn prices_keep_five_decimals() {
        for (price, ok) in [
            (-1.0, true),
            (0.05, true),
            (0.12345, true),
            (1.5, true),
            (0.123456, false),
            (0.000001, false),
        ] {
            assert_eq!(has_price_precision(price), ok, "{price}");
        }
    }
}
