//! A Node's Azure `spec.providerID` (`azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/
//! Microsoft.Compute/virtualMachines/<vm>`, or a scale set instance's
//! `…/virtualMachineScaleSets/<vmss>/virtualMachines/<id>`): the VM's name as IMDS names it in an
//! event's `Resources`, and, for the sandbox, the base URL of the VM's own metadata service.

use url::Url;

/// A VM named by a providerID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmId {
    /// The subscription id.
    pub subscription: String,
    /// The resource group.
    pub resource_group: String,
    /// The VM's name as IMDS writes it in `Resources`: `<vm>`, or `<vmss>_<id>` for a scale set
    /// instance.
    pub name: String,
    /// Whether the VM is a scale set instance.
    pub scale_set: bool,
}

/// A providerID that does not name an Azure VM.
#[derive(Debug, thiserror::Error)]
#[error(
    "spec.providerID {value} does not name an Azure VM (azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/<vm>)"
)]
pub struct ProviderIdError {
    /// The providerID, quoted.
    pub value: String,
}

/// Reads `provider_id`; the keywords in any casing, as Azure's ids ignore case.
///
/// # Errors
///
/// [`ProviderIdError`] when it is not an Azure VM's id.
pub fn parse(provider_id: &str) -> Result<VmId, ProviderIdError> {
    let refuse = || ProviderIdError {
        value: nodewright_model::text::quoted(provider_id),
    };
    let path = provider_id
        .trim()
        .strip_prefix("azure://")
        .ok_or_else(refuse)?;
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let is = |at: usize, word: &str| {
        segments
            .get(at)
            .is_some_and(|segment| segment.eq_ignore_ascii_case(word))
    };
    let value = |at: usize| -> Result<String, ProviderIdError> {
        segments
            .get(at)
            .filter(|segment| segment.chars().all(is_name_char))
            .map(|segment| (*segment).to_owned())
            .ok_or_else(refuse)
    };
    if !(is(0, "subscriptions")
        && is(2, "resourceGroups")
        && is(4, "providers")
        && is(5, "Microsoft.Compute"))
    {
        return Err(refuse());
    }
    let (name, scale_set) = match segments.len() {
        8 if is(6, "virtualMachines") => (value(7)?, false),
        10 if is(6, "virtualMachineScaleSets") && is(8, "virtualMachines") => {
            (format!("{}_{}", value(7)?, value(9)?), true)
        }
        _ => return Err(refuse()),
    };
    Ok(VmId {
        subscription: value(1)?,
        resource_group: value(3)?,
        name,
        scale_set,
    })
}

/// The base URL of `vm`'s metadata service in the sandbox at `sandbox`:
/// `<sandbox>/imds/subscriptions/<sub>/resourceGroups/<rg>/virtualMachines/<vm>`.
pub fn sandbox_imds_base(sandbox: &Url, vm: &VmId) -> Url {
    let mut base = sandbox.clone();
    if let Ok(mut segments) = base.path_segments_mut() {
        segments.pop_if_empty().extend([
            "imds",
            "subscriptions",
            &vm.subscription,
            "resourceGroups",
            &vm.resource_group,
            "virtualMachines",
            &vm.name,
        ]);
    }
    base
}

/// A character of a subscription, group or VM name (Azure allows these and nothing needing escape).
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '(' | ')')
}

#[cfg(test)]
mod tests {
    use super::*;

    const VM: &str = "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/nodewright-local/providers/Microsoft.Compute/virtualMachines/web-bcdfg";

    #[test]
    fn a_vm_and_a_scale_set_instance_are_read() {
        let vm = parse(VM).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(vm.name, "web-bcdfg");
        assert_eq!(vm.resource_group, "nodewright-local");
        assert!(!vm.scale_set);
        let instance = parse(
            "azure:///subscriptions/s/resourcegroups/mc_rg/providers/microsoft.compute/virtualmachinescalesets/aks-pool-1/virtualmachines/3",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(instance.name, "aks-pool-1_3");
        assert!(instance.scale_set);
    }

    #[test]
    fn anything_else_is_refused_naming_the_value() {
        for value in [
            "",
            "kwok://node-1",
            "azure:///subscriptions/s/resourceGroups/rg",
            "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualMachines/x",
            "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/a b",
        ] {
            let error = parse(value)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                error.contains("does not name an Azure VM"),
                "{value}: {error}"
            );
        }
    }

    #[test]
    fn the_sandbox_base_names_the_vm_under_imds() {
        let vm = parse(VM).unwrap_or_else(|e| panic!("{e}"));
        let sandbox = Url::parse("http://127.0.0.1:8443").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            sandbox_imds_base(&sandbox, &vm).as_str(),
            "http://127.0.0.1:8443/imds/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/nodewright-local/virtualMachines/web-bcdfg"
        );
    }
}
