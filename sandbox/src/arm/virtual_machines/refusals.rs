//! What Azure refuses in a VM create that a client can get wrong, answered in Azure's words:
//!
//! - a Linux VM with `disablePasswordAuthentication: true` and no SSH key: 400
//!   `InvalidParameter`, target `linuxConfiguration`, "Authentication using either SSH or by user
//!   name and password must be enabled in Linux profile.";
//! - a `Premium_LRS` / `Premium_ZRS` OS disk on a size without premium storage: 400
//!   `InvalidParameter`, "Requested operation cannot be performed because the VM size <size>
//!   does not support the storage account type <type> of disk '<disk>'. Consider updating the
//!   VM to a size that supports Premium storage."
//!
//! The sandbox's own reading of a size's name (it shares no code with nodewright's validation):
//! an `s` among the size's lowercase features, or the `DS`/`GS` families, means premium storage,
//! for the families listed in [`KNOWN_FAMILIES`]; any other size is accepted.

use serde_json::Value;

use super::super::error::ArmError;

/// Size families whose premium storage the name tells (A never has it).
const KNOWN_FAMILIES: [&str; 12] = [
    "A", "B", "D", "DS", "E", "F", "G", "GS", "L", "NC", "ND", "NV",
];

/// Refuses a create `req` (a VM body) that Azure refuses: no way to log in, or a premium OS
/// disk on a size without premium storage (`disk`: the OS disk's name, for the message).
pub(super) fn check_create(req: &Value, disk: &str) -> Result<(), ArmError> {
    let linux = &req["properties"]["osProfile"]["linuxConfiguration"];
    let keys = linux["ssh"]["publicKeys"]
        .as_array()
        .map_or(0, |keys| keys.len());
    if linux["disablePasswordAuthentication"].as_bool() == Some(true) && keys == 0 {
        return Err(ArmError::invalid(
            "linuxConfiguration",
            "Authentication using either SSH or by user name and password must be enabled in Linux profile.",
        ));
    }
    let size = req["properties"]["hardwareProfile"]["vmSize"]
        .as_str()
        .unwrap_or_default();
    let sku = req["properties"]["storageProfile"]["osDisk"]["managedDisk"]["storageAccountType"]
        .as_str()
        .unwrap_or_default();
    let premium_disk =
        sku.eq_ignore_ascii_case("Premium_LRS") || sku.eq_ignore_ascii_case("Premium_ZRS");
    if premium_disk && has_premium_storage(size) == Some(false) {
        return Err(ArmError::rejected(
            400,
            "InvalidParameter",
            format!(
                "Requested operation cannot be performed because the VM size {size} does not support the storage account type {sku} of disk '{disk}'. Consider updating the VM to a size that supports Premium storage."
            ),
        ));
    }
    Ok(())
}

/// Whether `size` has premium storage, when its family is known (`Basic_` sizes never do).
fn has_premium_storage(size: &str) -> Option<bool> {
    if size.starts_with("Basic_") {
        return Some(false);
    }
    let head = size.strip_prefix("Standard_")?.split('_').next()?;
    let family: String = head.chars().take_while(char::is_ascii_uppercase).collect();
    let rest = &head[family.len()..];
    let features = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    if features.len() == rest.len() || !KNOWN_FAMILIES.contains(&family.as_str()) {
        return None;
    }
    Some(family == "DS" || family == "GS" || features.contains('s'))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vm(size: &str, sku: &str, linux: Value) -> Value {
        json!({"properties": {
            "hardwareProfile": {"vmSize": size},
            "osProfile": {"computerName": "x", "adminUsername": "u", "linuxConfiguration": linux},
            "storageProfile": {"osDisk": {"createOption": "FromImage", "managedDisk": {"storageAccountType": sku}}},
        }})
    }

    fn key() -> Value {
        json!({"disablePasswordAuthentication": true, "ssh": {"publicKeys": [{"path": "/home/u/.ssh/authorized_keys", "keyData": "ssh-ed25519 AAAA u@h"}]}})
    }

    #[test]
    fn a_linux_vm_without_a_way_to_log_in_is_refused_as_azure_does() {
        let no_key = vm(
            "Standard_D2s_v5",
            "Premium_LRS",
            json!({"disablePasswordAuthentication": true}),
        );
        let error = check_create(&no_key, "d").expect_err("refused");
        assert_eq!(error.status().as_u16(), 400);
        assert_eq!(error.code(), "InvalidParameter");
        assert!(error.to_string().contains("Authentication using either SSH or by user name and password must be enabled in Linux profile."), "{error}");
        let empty = vm(
            "Standard_D2s_v5",
            "Premium_LRS",
            json!({"disablePasswordAuthentication": true, "ssh": {"publicKeys": []}}),
        );
        assert!(check_create(&empty, "d").is_err());
        assert!(check_create(&vm("Standard_D2s_v5", "Premium_LRS", key()), "d").is_ok());
        // Password login left on (or no Linux settings at all) is the caller's business.
        assert!(
            check_create(
                &vm(
                    "Standard_D2s_v5",
                    "Premium_LRS",
                    json!({"disablePasswordAuthentication": false})
                ),
                "d"
            )
            .is_ok()
        );
        assert!(check_create(&vm("Standard_D2s_v5", "Premium_LRS", Value::Null), "d").is_ok());
    }

    #[test]
    fn a_premium_os_disk_needs_a_size_with_premium_storage() {
        // size, OS disk type, refused
        let table = [
            ("Standard_D2_v5", "Premium_LRS", true),
            ("Standard_A2_v2", "Premium_ZRS", true),
            ("Basic_A1", "Premium_LRS", true),
            ("Standard_F4", "Premium_LRS", true),
            ("Standard_D2s_v5", "Premium_LRS", false),
            ("Standard_DS2_v2", "Premium_LRS", false),
            ("Standard_B2ms", "Premium_LRS", false),
            ("Standard_D2_v5", "StandardSSD_LRS", false),
            ("Standard_M64", "Premium_LRS", false),
        ];
        for (size, sku, refused) in table {
            let result = check_create(&vm(size, sku, key()), "web-abc12-osdisk");
            assert_eq!(result.is_err(), refused, "{size} {sku}");
            if let Err(error) = result {
                assert_eq!(error.code(), "InvalidParameter");
                assert_eq!(
                    error.to_string(),
                    format!(
                        "Requested operation cannot be performed because the VM size {size} does not support the storage account type {sku} of disk 'web-abc12-osdisk'. Consider updating the VM to a size that supports Premium storage."
                    )
                );
            }
        }
    }

    #[test]
    fn the_name_rule_agrees_with_the_size_catalogs_premium_io() {
        for size in crate::arm::sizes::CATALOG {
            if let Some(premium) = has_premium_storage(size.name) {
                assert_eq!(premium, size.premium_io, "{}", size.name);
            }
        }
    }
}
