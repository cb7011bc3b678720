//! Rules Azure applies when it builds the VM, checked on the pool file so that a pool Azure would
//! refuse is refused before the first create (issue 32, item 8):
//!
//! - **An SSH key.** nodewright builds Linux VMs with password login disabled
//!   (`linuxConfiguration.disablePasswordAuthentication: true`) and has no password setting, so
//!   Azure refuses a VM without an SSH key (400 `InvalidParameter`, "Authentication using either
//!   SSH or by user name and password must be enabled in Linux profile."): `sshPublicKey` is
//!   required.
//! - **Premium storage needs a size that has it.** A `Premium_LRS` or `Premium_ZRS` OS disk
//!   needs a VM size with premium storage, which Azure marks with an `s` among the size's
//!   additive features (`Standard_D2s_v5`, `Standard_E4ds_v5`, `Standard_B2ms`) or the old `DS`
//!   and `GS` families (`Standard_DS2_v2`); `Standard_D2_v5` or `Standard_A2_v2` have none and
//!   Azure refuses the VM (400 `InvalidParameter`, "... does not support the storage account
//!   type Premium_LRS ..."). [`premium_storage`] reads the size's name for the families in
//!   [`FAMILIES`] only: a size of any other family is allowed, with no claim.
//!
//! These rules apply to the pool file only (`validate()`), not to the inputs of runs already
//! started, which older pools without them still carry.

use super::{Problems, quoted};
use crate::pool::spec::MachineTemplate;

/// The OS disk types that need a VM size with premium storage.
const PREMIUM_DISK_TYPES: [&str; 2] = ["Premium_LRS", "Premium_ZRS"];

/// VM size families whose names tell premium storage by an `s` among their additive features
/// (the lowercase letters after the vCPU count): A (never has it), B, D, E, F, G, L, and the GPU
/// families NC, ND and NV.
const FAMILIES: [&str; 10] = ["A", "B", "D", "E", "F", "G", "L", "NC", "ND", "NV"];

/// Families that have premium storage whatever the features say (named before the `s` feature
/// existed).
const PREMIUM_FAMILIES: [&str; 2] = ["DS", "GS"];

/// Checks the template at `field` (`spec.template`) against what Azure refuses.
pub(super) fn check(problems: &mut Problems, field: &str, template: &MachineTemplate) {
    if template.ssh_public_key.is_none() {
        problems.push(
            format!("{field}.sshPublicKey"),
            "nothing",
            "is missing: nodewright creates Linux VMs with password login disabled, and Azure refuses such a VM without an SSH key",
            "set sshPublicKey to the one line of an OpenSSH public key (e.g. the contents of ~/.ssh/id_ed25519.pub: ssh-ed25519 AAAA... you@example.com)",
        );
    }
    let disk = template.os_disk.storage_account_type.as_str();
    if PREMIUM_DISK_TYPES.contains(&disk) && premium_storage(&template.vm_size) == Some(false) {
        problems.push(
            format!("{field}.osDisk.storageAccountType"),
            quoted(disk),
            format!(
                "needs a VM size with premium storage, and {} has none (no 's' among its features)",
                template.vm_size
            ),
            "use StandardSSD_LRS (or StandardSSD_ZRS, Standard_LRS), or a size with premium storage such as Standard_D2s_v5",
        );
    }
}

/// Whether VM size `size` has premium storage, read from its name: `Some` for the families in
/// [`FAMILIES`] and [`PREMIUM_FAMILIES`] (and `Basic_` sizes, which never have it), `None` (no
/// claim) for any other size or a name not of the shape `Standard_<family><vCPUs><features>...`.
pub(super) fn premium_storage(size: &str) -> Option<bool> {
    if size.starts_with("Basic_") {
        return Some(false);
    }
    let name = size.strip_prefix("Standard_")?.split('_').next()?;
    let family_len = name.find(|c: char| !c.is_ascii_uppercase())?;
    let (family, rest) = name.split_at(family_len);
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    if digits == 0 {
        return None;
    }
    let features = &rest[digits..];
    if !features.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    if PREMIUM_FAMILIES.contains(&family) {
        Some(true)
    } else if FAMILIES.contains(&family) {
        Some(features.contains('s'))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn premium_storage_is_read_from_the_size_of_a_known_family_only() {
        let table = [
            ("Standard_D2s_v5", Some(true)),
            ("Standard_D4ds_v5", Some(true)),
            ("Standard_D2as_v4", Some(true)),
            ("Standard_D2pls_v5", Some(true)),
            ("Standard_E4bds_v5", Some(true)),
            ("Standard_B2ms", Some(true)),
            ("Standard_B1ls", Some(true)),
            ("Standard_F2s_v2", Some(true)),
            ("Standard_L8s_v3", Some(true)),
            ("Standard_NC6s_v3", Some(true)),
            ("Standard_DS2_v2", Some(true)),
            ("Standard_GS1", Some(true)),
            ("Standard_D2_v5", Some(false)),
            ("Standard_D2a_v4", Some(false)),
            ("Standard_D1_v2", Some(false)),
            ("Standard_A2_v2", Some(false)),
            ("Standard_A2m_v2", Some(false)),
            ("Standard_F4", Some(false)),
            ("Standard_E2_v3", Some(false)),
            ("Standard_NV6", Some(false)),
            ("Basic_A1", Some(false)),
            // Unknown families and shapes: no claim.
            ("Standard_M64", None),
            ("Standard_DC2s_v2", None),
            ("Standard_HB120rs_v3", None),
            ("Standard_X2_v9", None),
            ("Standard_D", None),
            ("Standard_D2S_v5", None),
            ("D2s_v5", None),
        ];
        for (size, expected) in table {
            assert_eq!(premium_storage(size), expected, "{size}");
        }
    }
}
