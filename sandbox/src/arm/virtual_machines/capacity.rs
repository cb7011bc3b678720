//! What Azure checks of a VM's size before it accepts a create or a resize, answered
//! synchronously at the PUT/PATCH in Azure's words:
//!
//! - a size Azure does not have: 400 `InvalidParameter`, target `vmSize`, "The value
//!   Standard_Huge provided for the VM size is not valid. The valid sizes in the current region
//!   are: …";
//! - a size restricted for the subscription in the VM's location or zone (the quota
//!   configuration's restrictions): 409 `SkuNotAvailable`, "The requested size for resource
//!   '<VM id>' is currently not available in location 'westeurope' zones '2' for subscription
//!   '<sub>'. Please try another size or deploy to a different location or zones. See
//!   https://aka.ms/azureskunotavailable for details." (Microsoft Learn, *Resolve errors for SKU
//!   not available*);
//! - vCPUs beyond a quota (the family's, then the total regional, or for Spot VMs the
//!   low-priority one): 409 `OperationNotAllowed`, "Operation could not be completed as it
//!   results in exceeding approved standardDSv5Family Cores quota. Additional details -
//!   Deployment Model: Resource Manager, Location: westeurope, Current Limit: 8, Current Usage: 8,
//!   Additional Required: 2, (Minimum) New Limit Required: 10. …", as a direct VM PUT answers it
//!   (a template deployment wraps the same text in `QuotaExceeded`).
//!
//! The checks run under the emulator's lock together with the write that makes the VM, so two
//! creates racing for the last vCPUs cannot both pass: the first one's VM counts for the second.

use serde_json::Value;

use super::super::engine::Core;
use super::super::error::ArmError;
use super::super::quota::{Claim, Usage};
use super::super::sizes::{self, Size};
use super::super::state::Resource;

/// Refuses the create of the VM `vm_id` with body `vm` when its size is unknown, restricted in
/// its location or zone, or its vCPUs exceed a quota of subscription `sub`. A VM of that id
/// already stored (a failed create run again) does not count against itself.
pub(super) fn check_create(
    core: &Core,
    sub: &str,
    vm_id: &str,
    vm: &Value,
) -> Result<(), ArmError> {
    check(core, sub, vm_id, vm, None)
}

/// Refuses an update of `old` to the body `new` that changes its size (a resize) to one that is
/// unknown, restricted in its location or zone, or beyond a quota. Any other update passes.
pub(super) fn check_update(
    core: &Core,
    sub: &str,
    old: &Resource,
    new: &Value,
) -> Result<(), ArmError> {
    let before = Claim::of(&old.body);
    let after_size = new["properties"]["hardwareProfile"]["vmSize"]
        .as_str()
        .unwrap_or_default();
    let old_size = old.body["properties"]["hardwareProfile"]["vmSize"]
        .as_str()
        .unwrap_or_default();
    if old_size.eq_ignore_ascii_case(after_size) && before.spot == Claim::of(new).spot {
        return Ok(());
    }
    check(core, sub, old.id(), new, Some(before))
}

fn check(
    core: &Core,
    sub: &str,
    vm_id: &str,
    vm: &Value,
    before: Option<Claim>,
) -> Result<(), ArmError> {
    let location = vm["location"].as_str().unwrap_or_default();
    let zones: Vec<&str> = vm["zones"]
        .as_array()
        .map(|zones| zones.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let requested = vm["properties"]["hardwareProfile"]["vmSize"]
        .as_str()
        .unwrap_or_default();
    let Some(size) = sizes::find(requested) else {
        return Err(invalid_size(core, requested, location));
    };
    let restricted = if zones.is_empty() {
        core.quota.restricted(size.name, location, None)
    } else {
        zones
            .iter()
            .any(|zone| core.quota.restricted(size.name, location, Some(zone)))
    };
    if restricted {
        return Err(ArmError::rejected(
            409,
            "SkuNotAvailable",
            format!(
                "The requested size for resource '{vm_id}' is currently not available in location '{location}' zones '{}' for subscription '{sub}'. Please try another size or deploy to a different location or zones. See https://aka.ms/azureskunotavailable for details.",
                zones.join(",")
            ),
        ));
    }
    check_quota(core, sub, vm_id, vm, location, size, before)
}

/// The quota a VM's vCPUs count against, as Azure's message names it.
enum Quota<'a> {
    Family(&'a str),
    Regional,
    LowPriority,
}

fn check_quota(
    core: &Core,
    sub: &str,
    vm_id: &str,
    vm: &Value,
    location: &str,
    size: &'static Size,
    before: Option<Claim>,
) -> Result<(), ArmError> {
    let after = Claim {
        size: Some(size),
        ..Claim::of(vm)
    };
    let others = Usage::of(&core.state, sub, location, Some(vm_id));
    let mut current = others.clone();
    if let Some(before) = before {
        current.add(before);
    }
    let mut wanted = others;
    wanted.add(after);
    let limits = core.quota.limits(location);
    let checks = if after.spot {
        vec![(
            Quota::LowPriority,
            current.low_priority_vcpus,
            wanted.low_priority_vcpus,
            limits.low_priority_vcpus,
        )]
    } else {
        vec![
            (
                Quota::Family(size.family),
                current.family(size.family),
                wanted.family(size.family),
                limits.family(size.family),
            ),
            (
                Quota::Regional,
                current.regional_vcpus,
                wanted.regional_vcpus,
                limits.regional_vcpus,
            ),
        ]
    };
    for (quota, current, wanted, limit) in checks {
        if wanted > current && wanted > limit {
            return Err(quota_exceeded(
                &quota,
                sub,
                location,
                limit,
                current,
                wanted - current,
            ));
        }
    }
    Ok(())
}

/// 409 `OperationNotAllowed` for vCPUs beyond `quota`, in Azure's words.
fn quota_exceeded(
    quota: &Quota<'_>,
    sub: &str,
    location: &str,
    limit: u64,
    current: u64,
    additional: u64,
) -> ArmError {
    let name = match quota {
        Quota::Family(family) => format!("{family} Cores"),
        Quota::Regional => "Total Regional Cores".to_owned(),
        Quota::LowPriority => "LowPriorityCores".to_owned(),
    };
    let required = current + additional;
    let mut message = format!(
        "Operation could not be completed as it results in exceeding approved {name} quota. Additional details - Deployment Model: Resource Manager, Location: {location}, Current Limit: {limit}, Current Usage: {current}, Additional Required: {additional}, (Minimum) New Limit Required: {required}."
    );
    if let Quota::Family(family) = quota {
        let parameters = format!(
            "{{\"subscriptionId\":\"{sub}\",\"command\":\"openQuotaApprovalBlade\",\"quotas\":[{{\"location\":\"{location}\",\"providerId\":\"Microsoft.Compute\",\"resourceName\":\"{family}\",\"quotaRequest\":{{\"properties\":{{\"limit\":{required},\"unit\":\"Count\",\"name\":{{\"value\":\"{family}\"}}}}}}}}]}}"
        );
        let encoded = parameters
            .replace('{', "%7B")
            .replace('}', "%7D")
            .replace('"', "%22");
        message.push_str(&format!(
            " Setup Alerts when Quota reaches threshold. Learn more at https://aka.ms/quotamonitoringalerting . Submit a request for Quota increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView/Parameters/{encoded} by specifying parameters listed in the ‘Details’ section for deployment to succeed. Please read more about quota limits at https://docs.microsoft.com/en-us/azure/azure-supportability/per-vm-quota-requests"
        ));
    }
    ArmError::rejected(409, "OperationNotAllowed", message)
}

/// 400 `InvalidParameter` for a size Azure does not have, listing the ones the location offers
/// the subscription.
fn invalid_size(core: &Core, requested: &str, location: &str) -> ArmError {
    let valid: Vec<&str> = sizes::CATALOG
        .iter()
        .filter(|s| !core.quota.restricted(s.name, location, None))
        .map(|s| s.name)
        .collect();
    ArmError::invalid(
        "vmSize",
        format!(
            "The value {requested} provided for the VM size is not valid. The valid sizes in the current region are: {}.",
            valid.join(",")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_quota_message_reads_as_azures_with_the_increase_link() {
        let error = quota_exceeded(
            &Quota::Family("standardDSv5Family"),
            "sub-1",
            "westeurope",
            8,
            8,
            2,
        );
        assert_eq!(error.status().as_u16(), 409);
        assert_eq!(error.code(), "OperationNotAllowed");
        let message = error.to_string();
        assert!(
            message.starts_with("Operation could not be completed as it results in exceeding approved standardDSv5Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: westeurope, Current Limit: 8, Current Usage: 8, Additional Required: 2, (Minimum) New Limit Required: 10. Setup Alerts"),
            "{message}"
        );
        assert!(
            message.contains("%22resourceName%22:%22standardDSv5Family%22,%22quotaRequest%22:%7B%22properties%22:%7B%22limit%22:10,"),
            "{message}"
        );
        let regional = quota_exceeded(&Quota::Regional, "s", "eastus", 10, 8, 4).to_string();
        assert_eq!(
            regional,
            "Operation could not be completed as it results in exceeding approved Total Regional Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 10, Current Usage: 8, Additional Required: 4, (Minimum) New Limit Required: 12."
        );
    }
}
