//! Which api-versions the emulator accepts, per resource type, as ARM checks them: each type a
//! documented set — the version nodewright's own client sends and the defaults of the current
//! official SDKs (Python `azure-mgmt-compute` 39 and `azure-mgmt-network` 33, Go `armcompute`
//! v7/v8 and `armnetwork` v6–v10), with a few versions between — and any other version is
//! refused with 400 `InvalidApiVersionParameter` listing the supported ones, newest first, as
//! Azure words it. An async operation's polling URL carries the version of the request that
//! started it and is accepted with any.
//!
//! The bodies the emulator reads and writes are the same in every accepted version: the fields
//! nodewright and the SDKs use did not change between them.

use super::error::ArmError;

/// A resource type and the api-versions accepted for it, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceVersions {
    /// The type as ARM names it in messages (`virtualMachines`).
    pub resource_type: &'static str,
    /// The provider path segment that addresses it, lower case
    /// (`/microsoft.compute/virtualmachines`).
    pub segment: &'static str,
    /// The accepted api-versions, oldest first.
    pub versions: &'static [&'static str],
}

/// Virtual machines: 2024-07-01 is nodewright's; 2024-11-01 (Python compute 33–34), 2025-04-01
/// (Go armcompute v7), 2026-04-01 (Python compute 39, Go armcompute v8).
pub const VIRTUAL_MACHINES: ResourceVersions = ResourceVersions {
    resource_type: "virtualMachines",
    segment: "/microsoft.compute/virtualmachines",
    versions: &[
        "2024-03-01",
        "2024-07-01",
        "2024-11-01",
        "2025-04-01",
        "2025-11-01",
        "2026-04-01",
    ],
};

/// Managed disks (their own version line): 2024-03-02 is nodewright's; 2025-01-02 (Go
/// armcompute v7), 2026-03-02 (Python compute 39, Go armcompute v8).
pub const DISKS: ResourceVersions = ResourceVersions {
    resource_type: "disks",
    segment: "/microsoft.compute/disks",
    versions: &["2023-10-02", "2024-03-02", "2025-01-02", "2026-03-02"],
};

/// Network interfaces: 2024-03-01 is nodewright's; 2025-07-01 (Go armnetwork v10), 2026-03-01
/// (Python network 33).
pub const NETWORK_INTERFACES: ResourceVersions = ResourceVersions {
    resource_type: "networkInterfaces",
    segment: "/microsoft.network/networkinterfaces",
    versions: &[
        "2024-01-01",
        "2024-03-01",
        "2024-05-01",
        "2024-07-01",
        "2025-01-01",
        "2025-05-01",
        "2025-07-01",
        "2026-01-01",
        "2026-03-01",
    ],
};

/// Virtual networks and their subnets: the network interfaces' set (the same provider and
/// version line).
pub const VIRTUAL_NETWORKS: ResourceVersions = ResourceVersions {
    resource_type: "virtualNetworks",
    segment: "/microsoft.network/virtualnetworks",
    versions: NETWORK_INTERFACES.versions,
};

/// Resource SKUs (`Microsoft.Compute/skus`, their own version line): 2021-07-01 is the default
/// of Python compute 39 and Go armcompute v7/v8.
pub const SKUS: ResourceVersions = ResourceVersions {
    resource_type: "skus",
    segment: "/microsoft.compute/skus",
    versions: &["2017-09-01", "2019-04-01", "2021-07-01"],
};

/// Compute usages (`…/Microsoft.Compute/locations/{location}/usages`): the compute versions, as
/// for virtual machines (Python compute 39 sends 2026-04-01). Not in [`CHECKED`], whose
/// segments cannot name a path with a location in it: the usages handler checks it with
/// [`check_version`].
pub const USAGES: ResourceVersions = ResourceVersions {
    resource_type: "usages",
    segment: "/usages",
    versions: VIRTUAL_MACHINES.versions,
};

/// ARM's check of an api-`version` against the versions of `checked`: 400
/// `InvalidApiVersionParameter` with the supported ones when it is not one of them.
pub fn check_version(checked: &ResourceVersions, version: &str) -> Result<(), ArmError> {
    if checked.versions.contains(&version) {
        return Ok(());
    }
    let supported: Vec<&str> = checked.versions.iter().rev().copied().collect();
    Err(ArmError::InvalidApiVersion {
        version: version.to_owned(),
        supported: supported.join(","),
    })
}

/// Azure Compute Galleries (galleries, image definitions, image versions: their own version
/// line): 2025-12-03 (Go armcompute v8.3), 2026-03-03 (Python compute 39).
pub const GALLERIES: ResourceVersions = ResourceVersions {
    resource_type: "galleries",
    segment: "/microsoft.compute/galleries",
    versions: &[
        "2022-03-03",
        "2022-08-03",
        "2023-07-03",
        "2024-03-03",
        "2025-03-03",
        "2025-12-03",
        "2026-03-03",
    ],
};

/// Marketplace images (`locations/{l}/publishers/…`): the compute versions of virtual machines.
pub const VM_IMAGES: ResourceVersions = ResourceVersions {
    resource_type: "locations/publishers",
    segment: "/publishers",
    versions: VIRTUAL_MACHINES.versions,
};

/// Resource Graph queries: 2022-10-01 is nodewright's; 2021-03-01 (the first with
/// `objectArray` answers), 2024-04-01 (Python `azure-mgmt-resourcegraph` 8.1, Go
/// `armresourcegraph` 0.9).
pub const RESOURCE_GRAPH: ResourceVersions = ResourceVersions {
    resource_type: "resources",
    segment: "/microsoft.resourcegraph/resources",
    versions: &["2021-03-01", "2022-10-01", "2024-04-01"],
};

/// The version the emulator records for operations it starts itself (nodewright's).
pub const VM_DEFAULT: &str = "2024-07-01";

/// Every resource type whose versions are checked.
pub const CHECKED: [ResourceVersions; 8] = [
    VIRTUAL_MACHINES,
    DISKS,
    NETWORK_INTERFACES,
    SKUS,
    GALLERIES,
    VM_IMAGES,
    VIRTUAL_NETWORKS,
    RESOURCE_GRAPH,
];

/// ARM's check of a request's api-`version` for `path`: missing → 400
/// `MissingApiVersionParameter`; a version the addressed type does not accept → 400
/// `InvalidApiVersionParameter` with the supported ones; a polling URL or another path: any.
pub fn check_api_version(path: &str, version: Option<&str>) -> Result<(), ArmError> {
    let version = match version {
        Some(v) if !v.is_empty() => v,
        _ => return Err(ArmError::MissingApiVersion),
    };
    let lower = path.to_ascii_lowercase();
    if is_polling(&lower) {
        return Ok(());
    }
    let Some(checked) = CHECKED.iter().find(|r| addresses(&lower, r.segment)) else {
        return Ok(());
    };
    if checked.versions.contains(&version) {
        return Ok(());
    }
    let supported: Vec<&str> = checked.versions.iter().rev().copied().collect();
    Err(ArmError::InvalidApiVersion {
        version: version.to_owned(),
        supported: supported.join(","),
    })
}

/// An async operation's status or result (`.../locations/{l}/operations/{id}`,
/// `.../operationResults/{id}`).
fn is_polling(lower: &str) -> bool {
    lower.contains("/locations/")
        && (lower.contains("/operations/") || lower.contains("/operationresults/"))
}

/// Whether the lower-case `path` addresses the type of `segment` (the segment whole: not
/// `virtualMachineScaleSets` for `virtualMachines`).
fn addresses(lower: &str, segment: &str) -> bool {
    lower
        .match_indices(segment)
        .any(|(at, _)| matches!(lower[at + segment.len()..].chars().next(), None | Some('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VM: &str =
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web-a";
    const DISK: &str = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d";
    const NIC: &str =
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n";

    #[test]
    fn the_versions_nodewright_and_the_official_sdks_send_are_accepted() {
        let sent = [
            (VM, "2024-07-01"),
            (VM, "2026-04-01"),
            (VM, "2025-04-01"),
            (DISK, "2024-03-02"),
            (DISK, "2026-03-02"),
            (DISK, "2025-01-02"),
            (NIC, "2024-03-01"),
            (NIC, "2026-03-01"),
            (NIC, "2025-07-01"),
        ];
        for (path, version) in sent {
            assert_eq!(
                check_api_version(path, Some(version)),
                Ok(()),
                "{path} {version}"
            );
        }
        let list = "/subscriptions/s/providers/Microsoft.Compute/virtualMachines";
        assert_eq!(check_api_version(list, Some("2026-04-01")), Ok(()));
    }

    #[test]
    fn any_other_version_is_refused_listing_the_supported_ones_newest_first() {
        let refused = check_api_version(VM, Some("2026-03-02"));
        let Err(ArmError::InvalidApiVersion { version, supported }) = refused else {
            panic!("a disk version for a VM is refused: {refused:?}");
        };
        assert_eq!(version, "2026-03-02");
        assert_eq!(
            supported,
            "2026-04-01,2025-11-01,2025-04-01,2024-11-01,2024-07-01,2024-03-01"
        );
        let message = ArmError::InvalidApiVersion { version, supported }.to_string();
        assert!(
            message.starts_with(
                "The api-version '2026-03-02' is invalid. The supported versions are '2026-04-01,"
            ),
            "{message}"
        );
        for (path, version) in [
            (DISK, "2024-07-01"),
            (NIC, "2019-01-01"),
            (NIC, "2099-01-01"),
        ] {
            assert!(
                matches!(
                    check_api_version(path, Some(version)),
                    Err(ArmError::InvalidApiVersion { .. })
                ),
                "{path} {version}"
            );
        }
    }

    #[test]
    fn a_missing_version_is_refused_and_polling_urls_take_any() {
        assert_eq!(
            check_api_version(VM, None),
            Err(ArmError::MissingApiVersion)
        );
        assert_eq!(
            check_api_version(VM, Some("")),
            Err(ArmError::MissingApiVersion)
        );
        let poll =
            "/subscriptions/s/providers/Microsoft.Compute/locations/westeurope/operations/abc";
        assert_eq!(check_api_version(poll, Some("2015-01-01")), Ok(()));
        let other = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/x";
        assert_eq!(check_api_version(other, Some("2015-01-01")), Ok(()));
        let scale_sets = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/x";
        assert_eq!(check_api_version(scale_sets, Some("2015-01-01")), Ok(()));
    }

    #[test]
    fn every_set_is_sorted_and_holds_distinct_well_formed_dates() {
        for checked in CHECKED {
            let mut sorted = checked.versions.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted, checked.versions, "{}", checked.resource_type);
            for version in checked.versions {
                let parts: Vec<&str> = version.split('-').collect();
                assert!(
                    parts.len() == 3 && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_digit())),
                    "{version}"
                );
            }
        }
        assert!(VIRTUAL_MACHINES.versions.contains(&VM_DEFAULT));
    }
}
