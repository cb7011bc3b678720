//! Capacity types: whether a machine is an on-demand VM or a Spot VM (Azure's spare capacity,
//! cheaper, and taken back with a short notice), the pool template's Spot settings, and what a
//! machine of each type carries: the VM body's priority, eviction policy and maximum price, the
//! Node's `nodewright.io/capacity-type` label and, on request, AKS's Spot label and taint.
//!
//! A template lists the types its machines may be in order of preference
//! (`capacityTypes: [spot, on-demand]`); each machine is one of them, chosen when it is created
//! (the first the offerings allow, [`crate::capacity`]), and keeps it: a machine made on-demand
//! because Spot had no room is not out of date. What a template's machine of a type carries is
//! in [`super::machine_capacity`].

use std::fmt;

use serde::{Deserialize, Serialize};

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
