//! What a machine of a template carries for its capacity type: the template's allowed and
//! preferred types, its Spot settings defaulted, and the Node's capacity labels and taints.

use super::capacity_type::{
    AKS_SPOT_LABEL, AKS_SPOT_VALUE, CapacityType, LABEL_CAPACITY_TYPE, SpotSpec,
};
use super::spec::{MachineTemplate, TaintSpec};

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
