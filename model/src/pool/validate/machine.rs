//! Rules for the machine template: VM size, image, OS disk, subnet, zones, admin user, SSH key
//! and bootstrap data. Labels, taints and tags have their own modules.

use super::arm_id::{self, Segment};
use super::{Problems, kube, quoted, tags};
use crate::pool::spec::{ImageSource, MachineTemplate, OsDiskSpec};

/// The longest VM size name Azure uses.
const MAX_VM_SIZE_LEN: usize = 64;

/// OS disk sizes Azure accepts, in GiB.
const OS_DISK_SIZES_GB: std::ops::RangeInclusive<u32> = 30..=4095;

/// Storage types an OS disk can have. Premium SSD v2 (`PremiumV2_LRS`) and Ultra disks are for
/// data disks only.
const OS_DISK_TYPES: [&str; 5] = [
    "Premium_LRS",
    "StandardSSD_LRS",
    "Standard_LRS",
    "Premium_ZRS",
    "StandardSSD_ZRS",
];

/// The longest Linux admin user name Azure accepts.
const MAX_ADMIN_USERNAME_LEN: usize = 64;

/// Admin user names Azure refuses (its documented list for `osProfile.adminUsername`).
const REFUSED_ADMIN_USERNAMES: [&str; 32] = [
    "1",
    "123",
    "a",
    "actuser",
    "adm",
    "admin",
    "admin1",
    "admin2",
    "administrator",
    "aspnet",
    "backup",
    "console",
    "david",
    "guest",
    "john",
    "owner",
    "root",
    "server",
    "sql",
    "support",
    "support_388945a0",
    "sys",
    "test",
    "test1",
    "test2",
    "test3",
    "user",
    "user1",
    "user2",
    "user3",
    "user4",
    "user5",
];

/// How an OpenSSH public key Azure accepts starts.
const SSH_KEY_PREFIXES: [&str; 3] = ["ssh-rsa ", "ssh-ed25519 ", "ecdsa-sha2-"];

/// The largest bootstrap text, in bytes. Azure decodes `customData` from base64 into at most
/// 65,535 bytes; base64 turns those into at most 87,380 characters, which is the limit on the
/// encoded string. The rule is stated on the text as written, before encoding.
pub(super) const MAX_BOOTSTRAP_BYTES: usize = 65_535;

/// Checks where a template's machines go (at `field`): its VM size, subnet and zones.
pub(super) fn placement(
    problems: &mut Problems,
    field: &str,
    vm_size_value: &str,
    subnet: &str,
    zone_list: &[String],
) {
    vm_size(problems, &format!("{field}.vmSize"), vm_size_value);
    subnet_id(problems, &format!("{field}.subnetId"), subnet);
    zones(problems, &format!("{field}.zones"), zone_list);
}

/// Checks every field of the template at `field` (`spec.template`).
pub(super) fn check(problems: &mut Problems, field: &str, template: &MachineTemplate) {
    vm_size(problems, &format!("{field}.vmSize"), &template.vm_size);
    image(problems, &format!("{field}.image"), &template.image);
    os_disk(problems, &format!("{field}.osDisk"), &template.os_disk);
    subnet_id(problems, &format!("{field}.subnetId"), &template.subnet_id);
    zones(problems, &format!("{field}.zones"), &template.zones);
    kube::labels(problems, &format!("{field}.labels"), &template.labels);
    kube::taints(problems, &format!("{field}.taints"), &template.taints);
    tags::check(problems, &format!("{field}.tags"), &template.tags);
    admin_username(
        problems,
        &format!("{field}.adminUsername"),
        &template.admin_username,
    );
    if let Some(key) = &template.ssh_public_key {
        ssh_public_key(problems, &format!("{field}.sshPublicKey"), key);
    }
    if let Some(bootstrap) = &template.bootstrap {
        bootstrap_size(problems, &format!("{field}.bootstrap"), bootstrap);
    }
    super::bootstrap::check(problems, field, template);
    super::spot::check(problems, field, template);
}

/// `Standard_<size>` or `Basic_<size>`: `^(Standard|Basic)_[A-Za-z0-9]+(_[A-Za-z0-9]+)*$`.
fn vm_size(problems: &mut Problems, field: &str, size: &str) {
    const FIX: &str =
        "write the size as Azure names it, Standard_<size> or Basic_<size> (e.g. Standard_D4s_v5)";
    if size.len() > MAX_VM_SIZE_LEN {
        problems.push(field, quoted(size), "is longer than 64 characters", FIX);
        return;
    }
    let rest = size
        .strip_prefix("Standard_")
        .or_else(|| size.strip_prefix("Basic_"));
    let well_formed = rest.is_some_and(|rest| {
        rest.split('_')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric()))
    });
    if !well_formed {
        problems.push(field, quoted(size), "is not an Azure VM size", FIX);
    }
}

/// Exactly one of `id` or the full marketplace reference.
fn image(problems: &mut Problems, field: &str, image: &ImageSource) {
    const MARKETPLACE_FIX: &str = "set all four of publisher, offer, sku and version \
         (e.g. Canonical, ubuntu-24_04-lts, server, latest)";
    let marketplace = [
        ("publisher", &image.publisher),
        ("offer", &image.offer),
        ("sku", &image.sku),
        ("version", &image.version),
    ];
    let any_marketplace = marketplace.iter().any(|(_, value)| value.is_some());
    match (&image.id, any_marketplace) {
        (Some(id), true) => problems.push(
            field,
            quoted(id),
            "sets both id and a marketplace reference",
            "keep either id or publisher, offer, sku and version",
        ),
        (None, false) => problems.push(
            field,
            "{}",
            "names no image",
            format!("set id to a gallery image version, or {MARKETPLACE_FIX}"),
        ),
        (Some(id), false) => image_id(problems, &format!("{field}.id"), id),
        (None, true) => {
            for (name, value) in marketplace {
                match value {
                    None => problems.push(
                        format!("{field}.{name}"),
                        "nothing",
                        "is missing",
                        MARKETPLACE_FIX,
                    ),
                    Some(value) if value.trim().is_empty() => problems.push(
                        format!("{field}.{name}"),
                        quoted(value),
                        "is empty",
                        MARKETPLACE_FIX,
                    ),
                    Some(_) => {}
                }
            }
        }
    }
}

/// A gallery image version or definition (whose newest version is resolved), a managed image,
/// or a community or shared gallery image version or definition.
fn image_id(problems: &mut Problems, field: &str, id: &str) {
    const SHAPES: [&[Segment]; 7] = [
        arm_id::GALLERY_IMAGE_VERSION,
        arm_id::GALLERY_IMAGE,
        arm_id::MANAGED_IMAGE,
        arm_id::COMMUNITY_GALLERY_IMAGE,
        arm_id::COMMUNITY_GALLERY_DEFINITION,
        arm_id::SHARED_GALLERY_IMAGE,
        arm_id::SHARED_GALLERY_DEFINITION,
    ];
    if !SHAPES.iter().any(|shape| arm_id::matches(id, shape)) {
        problems.push(
            field,
            quoted(id),
            "is not the ARM id of an image",
            "use /subscriptions/<subscription>/resourceGroups/<group>/providers/Microsoft.Compute/\
             galleries/<gallery>/images/<image>[/versions/<version>] (without a version: \
             the newest, resolved once), .../providers/Microsoft.Compute/images/<image>, \
             /CommunityGalleries/<gallery>/Images/<image>[/Versions/<version>] or \
             /SharedGalleries/<gallery>/Images/<image>[/Versions/<version>]",
        );
    }
}

/// Size within Azure's limits, and a storage type an OS disk can have.
fn os_disk(problems: &mut Problems, field: &str, disk: &OsDiskSpec) {
    if let Some(size) = disk.size_gb
        && !OS_DISK_SIZES_GB.contains(&size)
    {
        problems.push(
            format!("{field}.sizeGB"),
            size.to_string(),
            "is outside 30-4095 GiB",
            "set sizeGB between 30 and 4095 (e.g. 64), or remove it to keep the image's size",
        );
    }
    let kind = disk.storage_account_type.as_str();
    if !OS_DISK_TYPES.contains(&kind) {
        let problem = if kind == "PremiumV2_LRS" || kind == "UltraSSD_LRS" {
            "is a data-disk type that Azure refuses for OS disks"
        } else {
            "is not an OS disk storage type"
        };
        problems.push(
            format!("{field}.storageAccountType"),
            quoted(kind),
            problem,
            format!("use one of {}", OS_DISK_TYPES.join(", ")),
        );
    }
}

/// The ARM id of a subnet.
fn subnet_id(problems: &mut Problems, field: &str, id: &str) {
    if !arm_id::matches(id, arm_id::SUBNET) {
        problems.push(
            field,
            quoted(id),
            "is not the ARM id of a subnet",
            "use /subscriptions/<subscription id>/resourceGroups/<group>/providers/\
             Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>",
        );
    }
}

/// Each zone `"1"`, `"2"` or `"3"`, once.
fn zones(problems: &mut Problems, field: &str, zones: &[String]) {
    for (index, zone) in zones.iter().enumerate() {
        let item = format!("{field}[{index}]");
        if !matches!(zone.as_str(), "1" | "2" | "3") {
            problems.push(
                item,
                quoted(zone),
                "is not an availability zone",
                "use \"1\", \"2\" or \"3\", or no zones in a region without them",
            );
        } else if zones[..index].contains(zone) {
            problems.push(
                item,
                quoted(zone),
                "repeats a zone listed before",
                "list each zone once",
            );
        }
    }
}

/// 1-64 characters, `[a-z_][a-z0-9_-]*`, not a name Azure refuses.
fn admin_username(problems: &mut Problems, field: &str, name: &str) {
    const FIX: &str = "use 1-64 characters of a-z, 0-9, '_' and '-', starting with a letter or \
         '_', other than Azure's reserved names such as root or admin (e.g. \"nodewright\")";
    let problem = if name.is_empty() {
        "is empty"
    } else if name.len() > MAX_ADMIN_USERNAME_LEN {
        "is longer than 64 characters"
    } else if !name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        "is not a Linux user name"
    } else if REFUSED_ADMIN_USERNAMES.contains(&name) {
        "is a name Azure refuses for the admin user"
    } else {
        return;
    };
    problems.push(field, quoted(name), problem, FIX);
}

/// An OpenSSH public key line of a type Azure accepts.
fn ssh_public_key(problems: &mut Problems, field: &str, key: &str) {
    if !SSH_KEY_PREFIXES
        .iter()
        .any(|prefix| key.starts_with(prefix))
    {
        problems.push(
            field,
            quoted(key),
            "is not an OpenSSH public key",
            "paste the one line of your .pub file, starting with ssh-ed25519, ssh-rsa or \
             ecdsa-sha2-, or remove sshPublicKey",
        );
    }
}

/// Small enough for Azure's `customData`.
fn bootstrap_size(problems: &mut Problems, field: &str, bootstrap: &str) {
    if bootstrap.len() > MAX_BOOTSTRAP_BYTES {
        problems.push(
            field,
            format!("{} bytes", bootstrap.len()),
            "is longer than 65,535 bytes",
            "Azure's customData holds at most 65,535 bytes (87,380 once base64-encoded); \
             have the script download the rest",
        );
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn accepts_every_size_of_the_documented_shape(
            family in "(Standard|Basic)",
            parts in prop::collection::vec("[A-Za-z0-9]{1,6}", 1..5),
        ) {
            let size = format!("{family}_{}", parts.join("_"));
            let mut problems = Problems::default();
            vm_size(&mut problems, "vmSize", &size);
            prop_assert_eq!(problems.0.is_empty(), size.len() <= MAX_VM_SIZE_LEN);
        }

        #[test]
        fn refuses_sizes_without_the_family_prefix(size in "[A-Za-z0-9_]{0,20}") {
            prop_assume!(!size.starts_with("Standard_") && !size.starts_with("Basic_"));
            let mut problems = Problems::default();
            vm_size(&mut problems, "vmSize", &size);
            prop_assert_eq!(problems.0.len(), 1);
        }

        #[test]
        fn accepts_linux_user_names_unless_azure_reserves_them(name in "[a-z_][a-z0-9_-]{0,63}") {
            let mut problems = Problems::default();
            admin_username(&mut problems, "adminUsername", &name);
            prop_assert_eq!(
                problems.0.is_empty(),
                !REFUSED_ADMIN_USERNAMES.contains(&name.as_str())
            );
        }
    }
}
