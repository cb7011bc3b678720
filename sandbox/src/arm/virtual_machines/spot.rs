//! What Azure checks of a Spot VM's create, answered synchronously at the PUT in Azure's words
//! (Microsoft Learn, *Error messages for Azure Spot Virtual Machines and scale sets*), and the
//! defaults it writes:
//!
//! - `billingProfile.maxPrice` other than -1 or a positive number with at most 5 decimals: 400
//!   `MaxPriceValueInvalid`, naming the value;
//! - `billingProfile.maxPrice` or `evictionPolicy` on a VM that is not Spot (`priority` `Spot`
//!   or its older name `Low`): 400 `InvalidParameter` naming the field;
//! - a Spot VM of a size without Spot: 400 `AzureSpotIsNotSupportedForThisVMSize`;
//! - an ephemeral OS disk (`osDisk.diffDiskSettings`) on a Spot VM evicted by deallocation: 400
//!   `InvalidParameter` (Azure keeps no OS disk to deallocate to: the policy must be `Delete`);
//! - a positive `maxPrice` below the size's Spot price in force: 409
//!   `SpotPriceGreaterThanProvidedMaxPrice` (the status is the sandbox's choice: Azure's docs name
//!   the code, not the status).
//!
//! A Spot VM created without them gets `evictionPolicy: Deallocate` and
//! `billingProfile.maxPrice: -1`, as Azure defaults them.

use serde_json::{Value, json};

use super::super::error::ArmError;
use super::super::sizes;
use super::super::spot_prices::SpotPrices;
use super::super::state::{obj_at, props};

/// Whether the VM body is a Spot VM (`priority` `Spot`, or its older name `Low`).
pub fn is_spot(body: &Value) -> bool {
    body["properties"]["priority"]
        .as_str()
        .is_some_and(|p| p.eq_ignore_ascii_case("Spot") || p.eq_ignore_ascii_case("Low"))
}

/// Whether a Spot VM's eviction deletes it (`evictionPolicy: Delete`; `Deallocate` otherwise).
pub fn evicted_by_deletion(body: &Value) -> bool {
    body["properties"]["evictionPolicy"]
        .as_str()
        .is_some_and(|p| p.eq_ignore_ascii_case("Delete"))
}

/// A Spot VM's `billingProfile.maxPrice`, when it names a price (not -1).
pub fn max_price(body: &Value) -> Option<f64> {
    body["properties"]["billingProfile"]["maxPrice"]
        .as_f64()
        .filter(|price| *price > 0.0)
}

/// Refuses the create of the VM body `vm` that Azure refuses for its Spot settings (see the
/// module's list), with `prices` the Spot prices in force. A size the catalog does not have is
/// left to the size checks (`capacity.rs`).
pub(super) fn check_create(prices: &SpotPrices, vm: &Value) -> Result<(), ArmError> {
    let p = &vm["properties"];
    let spot = is_spot(vm);
    let given = p["billingProfile"].get("maxPrice");
    if let Some(value) = given
        && !valid_max_price(value)
    {
        return Err(ArmError::rejected_at(
            400,
            "MaxPriceValueInvalid",
            "billingProfile.maxPrice",
            format!(
                "Invalid max price value '{value}'. The only supported values for max price are -1 or a decimal greater than zero (at most 5 decimals). Max price value of -1 indicates the Azure Spot virtual machine will not be evicted for price reasons."
            ),
        ));
    }
    if !spot {
        if given.is_some() {
            return Err(ArmError::invalid(
                "billingProfile.maxPrice",
                "Max price (billingProfile.maxPrice) can be set only on Azure Spot Virtual Machines.",
            ));
        }
        if p.get("evictionPolicy").is_some() {
            return Err(ArmError::invalid(
                "evictionPolicy",
                "Eviction policy can be set only on Azure Spot Virtual Machines.",
            ));
        }
        return Ok(());
    }
    let requested = p["hardwareProfile"]["vmSize"].as_str().unwrap_or_default();
    let Some(size) = sizes::find(requested) else {
        return Ok(());
    };
    let Some(price) = prices.price(size) else {
        return Err(ArmError::rejected(
            400,
            "AzureSpotIsNotSupportedForThisVMSize",
            format!(
                "{}. This size does not support Azure Spot. Please choose another size.",
                size.name
            ),
        ));
    };
    if p["storageProfile"]["osDisk"]
        .get("diffDiskSettings")
        .is_some()
        && !evicted_by_deletion(vm)
    {
        return Err(ArmError::invalid(
            "evictionPolicy",
            "Azure Spot Virtual Machines with an ephemeral OS disk (diffDiskSettings) require evictionPolicy 'Delete'.",
        ));
    }
    if let Some(max) = max_price(vm)
        && max < price
    {
        return Err(ArmError::rejected(
            409,
            "SpotPriceGreaterThanProvidedMaxPrice",
            format!(
                "Unable to perform operation 'Create VM' since the provided max price '{max} USD' is lower than the current spot price '{price} USD' for Azure Spot VM size '{}'.",
                size.name
            ),
        ));
    }
    Ok(())
}

/// Whether `value` is a valid `maxPrice`: -1, or a number above zero with at most 5 decimals.
fn valid_max_price(value: &Value) -> bool {
    let Some(price) = value.as_f64() else {
        return false;
    };
    if price == -1.0 {
        return true;
    }
    let scaled = price * 100_000.0;
    price > 0.0 && price.is_finite() && (scaled - scaled.round()).abs() < 1e-6
}

/// Writes Azure's defaults into a Spot VM's body: `evictionPolicy: Deallocate` and
/// `billingProfile.maxPrice: -1` when absent. Other VMs are left alone.
pub(super) fn stamp_defaults(body: &mut Value) {
    if !is_spot(body) {
        return;
    }
    let p = props(body);
    p.entry("evictionPolicy").or_insert(json!("Deallocate"));
    let billing = obj_at(&mut body["properties"], "billingProfile");
    billing.entry("maxPrice").or_insert(json!(-1));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(properties: Value) -> Value {
        let mut body = json!({"properties": {"hardwareProfile": {"vmSize": "Standard_D4s_v5"}}});
        super::super::super::state::merge(&mut body, json!({ "properties": properties }));
        body
    }

    fn refusal(body: &Value) -> Option<(u16, String, String)> {
        check_create(&SpotPrices::default(), body)
            .err()
            .map(|e| (e.status().as_u16(), e.code().to_owned(), e.to_string()))
    }

    #[test]
    fn spot_vms_are_spot_or_low_priority_and_evicted_by_deallocation_unless_told_to_delete() {
        assert!(is_spot(&json!({"properties": {"priority": "Spot"}})));
        assert!(is_spot(&json!({"properties": {"priority": "low"}})));
        assert!(!is_spot(&json!({"properties": {"priority": "Regular"}})));
        assert!(!is_spot(&json!({"properties": {}})));
        assert!(evicted_by_deletion(
            &json!({"properties": {"evictionPolicy": "Delete"}})
        ));
        assert!(!evicted_by_deletion(&json!({"properties": {}})));
    }

    #[test]
    fn max_prices_are_minus_one_or_positive_with_five_decimals_at_most() {
        for ok in [json!(-1), json!(-1.0), json!(0.5), json!(0.00001), json!(3)] {
            assert!(valid_max_price(&ok), "{ok}");
        }
        for bad in [
            json!(0),
            json!(-2),
            json!(0.000001),
            json!("0.5"),
            json!(null),
        ] {
            assert!(!valid_max_price(&bad), "{bad}");
        }
        let (status, code, message) = refusal(&vm(
            json!({"priority": "Spot", "billingProfile": {"maxPrice": -0.5}}),
        ))
        .unwrap();
        assert_eq!((status, code.as_str()), (400, "MaxPriceValueInvalid"));
        assert!(message.contains("'-0.5'"), "{message}");
    }

    #[test]
    fn spot_settings_on_a_regular_vm_are_refused_naming_the_field() {
        let (status, code, _) = refusal(&vm(json!({"billingProfile": {"maxPrice": -1}}))).unwrap();
        assert_eq!((status, code.as_str()), (400, "InvalidParameter"));
        let (_, code, _) = refusal(&vm(json!({"evictionPolicy": "Delete"}))).unwrap();
        assert_eq!(code, "InvalidParameter");
        assert_eq!(refusal(&vm(json!({"priority": "Regular"}))), None);
    }

    #[test]
    fn sizes_without_spot_ephemeral_disks_and_low_max_prices_are_refused() {
        let mut b2 = vm(json!({"priority": "Spot"}));
        b2["properties"]["hardwareProfile"]["vmSize"] = json!("Standard_B2s");
        let (status, code, _) = refusal(&b2).unwrap();
        assert_eq!(
            (status, code.as_str()),
            (400, "AzureSpotIsNotSupportedForThisVMSize")
        );
        let ephemeral = json!({"priority": "Spot", "storageProfile": {"osDisk": {"diffDiskSettings": {"option": "Local"}}}});
        assert_eq!(refusal(&vm(ephemeral.clone())).unwrap().0, 400);
        let mut deleted = ephemeral;
        deleted["evictionPolicy"] = json!("Delete");
        assert_eq!(refusal(&vm(deleted)), None);
        let (status, code, message) = refusal(&vm(
            json!({"priority": "Spot", "billingProfile": {"maxPrice": 0.01}}),
        ))
        .unwrap();
        assert_eq!(
            (status, code.as_str()),
            (409, "SpotPriceGreaterThanProvidedMaxPrice")
        );
        assert!(message.contains("'0.0384 USD'"), "{message}");
        assert_eq!(
            refusal(&vm(
                json!({"priority": "Spot", "billingProfile": {"maxPrice": 0.0384}})
            )),
            None,
            "a max price equal to the Spot price is accepted"
        );
    }

    #[test]
    fn spot_vms_get_azures_defaults_and_others_none() {
        let mut spot = vm(json!({"priority": "Spot"}));
        stamp_defaults(&mut spot);
        assert_eq!(spot["properties"]["evictionPolicy"], "Deallocate");
        assert_eq!(spot["properties"]["billingProfile"]["maxPrice"], -1);
        let mut regular = vm(json!({}));
        stamp_defaults(&mut regular);
        assert!(regular["properties"].get("evictionPolicy").is_none());
    }
}
