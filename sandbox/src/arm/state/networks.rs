//! What a virtual network stores beside its body: the private IP addresses given out in each of
//! its subnets. The rules that read and write them are in `networks.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Per subnet (its lower-cased name), the addresses given out (IPv4 as a `u32`) and the IP
/// configuration holding each (`{nic id}/ipConfigurations/{name}`). An entry may outlive its
/// NIC (a VM delete cascades to its NICs without visiting the network): it counts only while
/// the NIC still names that subnet and address, and stale ones are dropped when the subnet
/// next gives out an address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocations(pub BTreeMap<String, BTreeMap<u32, String>>);

impl Allocations {
    /// Whether no subnet holds an entry.
    pub fn is_empty(&self) -> bool {
        self.0.values().all(BTreeMap::is_empty)
    }

    /// The entries of `subnet` (any casing), in address order.
    pub fn of(&self, subnet: &str) -> Vec<(u32, &str)> {
        self.0
            .get(&subnet.to_ascii_lowercase())
            .into_iter()
            .flatten()
            .map(|(ip, holder)| (*ip, holder.as_str()))
            .collect()
    }

    /// The entries of `subnet` (any casing), mutably; created when absent.
    pub fn of_mut(&mut self, subnet: &str) -> &mut BTreeMap<u32, String> {
        self.0.entry(subnet.to_ascii_lowercase()).or_default()
    }

    /// Forgets `subnet` (any casing).
    pub fn remove(&mut self, subnet: &str) {
        self.0.remove(&subnet.to_ascii_lowercase());
    }
}
