//! The Azure RBAC action behind every request the Azure clients make, one row per request kind.
//! `deploy/azure-role.json` grants exactly these actions (the test below keeps the two equal), and
//! [`action_for`] names the action of a request by its method and path, so that a test can check
//! any request the clients send against the table.
//!
//! Besides the action of each request, ARM checks *linked* actions on resources a body refers to:
//! a NIC's subnet (`subnets/join/action`), a VM's NIC (`networkInterfaces/join/action`) and a
//! gallery image (`galleries/images/versions/read`); they are rows too, with the request that
//! needs them.

/// One request kind and the action it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    /// The request, for people: method and path shape.
    pub request: &'static str,
    /// The Azure RBAC action (or data action).
    pub action: &'static str,
    /// Whether it is a data action (Key Vault's data plane), not a control-plane one.
    pub data: bool,
}

const fn control(request: &'static str, action: &'static str) -> Permission {
    Permission {
        request,
        action,
        data: false,
    }
}

/// Every request kind of the ARM and Key Vault clients and the action it needs.
pub const PERMISSIONS: &[Permission] = &[
    control(
        "GET virtualMachines[/{name}] (get, instance view, list; a pool controller's Resource Graph query reads only what this allows)",
        "Microsoft.Compute/virtualMachines/read",
    ),
    control(
        "PUT|PATCH virtualMachines/{name} (create, tags, data disks)",
        "Microsoft.Compute/virtualMachines/write",
    ),
    control(
        "POST virtualMachines/{name}/attachDetachDataDisks",
        "Microsoft.Compute/virtualMachines/attachDetachDataDisks/action",
    ),
    control(
        "POST virtualMachines/{name}/restart (a pool controller's restart rung)",
        "Microsoft.Compute/virtualMachines/restart/action",
    ),
    control(
        "POST virtualMachines/{name}/redeploy (a pool controller's redeploy rung)",
        "Microsoft.Compute/virtualMachines/redeploy/action",
    ),
    control(
        "DELETE virtualMachines/{name}",
        "Microsoft.Compute/virtualMachines/delete",
    ),
    control(
        "PUT virtualMachines/{name}: the NIC it names (linked)",
        "Microsoft.Network/networkInterfaces/join/action",
    ),
    control(
        "PUT virtualMachines/{name}: a pool's gallery image (linked)",
        "Microsoft.Compute/galleries/images/versions/read",
    ),
    control(
        "GET disks[/{name}] (get, get by id, list)",
        "Microsoft.Compute/disks/read",
    ),
    control("PUT disks/{name}", "Microsoft.Compute/disks/write"),
    control("DELETE disks/{name}", "Microsoft.Compute/disks/delete"),
    control(
        "GET networkInterfaces[/{name}] (get, list)",
        "Microsoft.Network/networkInterfaces/read",
    ),
    control(
        "PUT networkInterfaces/{name}",
        "Microsoft.Network/networkInterfaces/write",
    ),
    control(
        "DELETE networkInterfaces/{name}",
        "Microsoft.Network/networkInterfaces/delete",
    ),
    control(
        "PUT networkInterfaces/{name}: the subnet it joins (linked)",
        "Microsoft.Network/virtualNetworks/subnets/join/action",
    ),
    control(
        "GET Microsoft.Compute/locations/{l}/operations/{id} (VM operations, both protocols)",
        "Microsoft.Compute/locations/operations/read",
    ),
    control(
        "GET Microsoft.Compute/locations/{l}/DiskOperations/{id} (disk operations)",
        "Microsoft.Compute/locations/DiskOperations/read",
    ),
    control(
        "GET Microsoft.Network/locations/{l}/operations/{id} (Azure-AsyncOperation)",
        "Microsoft.Network/locations/operations/read",
    ),
    control(
        "GET Microsoft.Network/locations/{l}/operationResults/{id} (Location)",
        "Microsoft.Network/locations/operationResults/read",
    ),
    control(
        "GET virtualNetworks/{name}/usages (headroom: the subnet's free addresses)",
        "Microsoft.Network/virtualNetworks/read",
    ),
    control(
        "GET virtualNetworks/{name}/subnets/{subnet} (headroom, when the network's usages answer 403)",
        "Microsoft.Network/virtualNetworks/subnets/read",
    ),
    control(
        "GET Microsoft.Compute/locations/{l}/usages (headroom: the vCPU quotas; subscription scope)",
        "Microsoft.Compute/locations/usages/read",
    ),
    control(
        "GET Microsoft.Compute/skus (headroom: a size's vCPUs and restrictions; subscription scope)",
        "Microsoft.Compute/skus/read",
    ),
    control(
        "GET galleries/{g}/images/{i}/versions (image resolution: a gallery image's versions)",
        "Microsoft.Compute/galleries/images/versions/read",
    ),
    control(
        "GET Microsoft.Compute/locations/{l}/publishers/{p}/artifacttypes/vmimage/offers/{o}/skus/{s}/versions (image resolution: a marketplace image's versions; subscription scope)",
        "Microsoft.Compute/locations/publishers/artifacttypes/offers/skus/versions/read",
    ),
    control(
        "GET Microsoft.Compute/locations/{l}/sharedGalleries/{g}/images/{i}/versions (image resolution: a direct shared gallery image's versions; subscription scope)",
        "Microsoft.Compute/locations/sharedGalleries/images/versions/read",
    ),
    control(
        "GET Microsoft.Compute/locations/{l}/communityGalleries/{g}/images/{i}/versions (image resolution: a community gallery image's versions; subscription scope)",
        "Microsoft.Compute/locations/communityGalleries/images/versions/read",
    ),
    Permission {
        request: "GET {vault}/secrets/{name}[/{version}] (Key Vault bootstrap)",
        action: "Microsoft.KeyVault/vaults/secrets/getSecret/action",
        data: true,
    },
];

/// The action a request to ARM needs, by method and path (without the query); `None` for a
/// request no row covers. Linked actions are not returned (they depend on the body).
pub fn action_for(method: &str, path: &str) -> Option<&'static str> {
    let segments: Vec<String> = path
        .split('/')
        .filter(|segment| !segment.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let providers = segments.iter().position(|s| s == "providers")?;
    let rest: Vec<&str> = segments[providers + 1..]
        .iter()
        .map(String::as_str)
        .collect();
    let method = method.to_ascii_uppercase();
    let wanted = match (method.as_str(), rest.as_slice()) {
        ("GET", ["microsoft.compute", "locations", _, "operations", _]) => {
            "Microsoft.Compute/locations/operations/read"
        }
        ("GET", ["microsoft.compute", "locations", _, "diskoperations", _]) => {
            "Microsoft.Compute/locations/DiskOperations/read"
        }
        ("GET", ["microsoft.network", "locations", _, "operations", _]) => {
            "Microsoft.Network/locations/operations/read"
        }
        ("GET", ["microsoft.network", "locations", _, "operationresults", _]) => {
            "Microsoft.Network/locations/operationResults/read"
        }
        ("GET", ["microsoft.network", "virtualnetworks", _, "usages"]) => {
            "Microsoft.Network/virtualNetworks/read"
        }
        ("GET", ["microsoft.network", "virtualnetworks", _, "subnets", _]) => {
            "Microsoft.Network/virtualNetworks/subnets/read"
        }
        ("GET", ["microsoft.compute", "locations", _, "usages"]) => {
            "Microsoft.Compute/locations/usages/read"
        }
        ("GET", ["microsoft.compute", "skus"]) => "Microsoft.Compute/skus/read",
        ("GET", ["microsoft.compute", "galleries", _, "images", _, "versions"]) => {
            "Microsoft.Compute/galleries/images/versions/read"
        }
        (
            "GET",
            [
                "microsoft.compute",
                "locations",
                _,
                "publishers",
                _,
                "artifacttypes",
                _,
                "offers",
                _,
                "skus",
                _,
                "versions",
            ],
        ) => "Microsoft.Compute/locations/publishers/artifacttypes/offers/skus/versions/read",
        (
            "GET",
            [
                "microsoft.compute",
                "locations",
                _,
                "sharedgalleries",
                _,
                "images",
                _,
                "versions",
            ],
        ) => "Microsoft.Compute/locations/sharedGalleries/images/versions/read",
        (
            "GET",
            [
                "microsoft.compute",
                "locations",
                _,
                "communitygalleries",
                _,
                "images",
                _,
                "versions",
            ],
        ) => "Microsoft.Compute/locations/communityGalleries/images/versions/read",
        (_, [namespace, kind, tail @ ..]) => {
            let resource = match (*namespace, *kind) {
                ("microsoft.compute", "virtualmachines") => "Microsoft.Compute/virtualMachines",
                ("microsoft.compute", "disks") => "Microsoft.Compute/disks",
                ("microsoft.network", "networkinterfaces") => "Microsoft.Network/networkInterfaces",
                _ => return None,
            };
            let verb = match (method.as_str(), tail) {
                ("GET", [] | [_]) => "read",
                ("PUT" | "PATCH", [_]) => "write",
                ("DELETE", [_]) => "delete",
                ("POST", [_, "attachdetachdatadisks"]) if resource.ends_with("virtualMachines") => {
                    "attachDetachDataDisks/action"
                }
                ("POST", [_, "restart"]) if resource.ends_with("virtualMachines") => {
                    "restart/action"
                }
                ("POST", [_, "redeploy"]) if resource.ends_with("virtualMachines") => {
                    "redeploy/action"
                }
                _ => return None,
            };
            return PERMISSIONS
                .iter()
                .map(|permission| permission.action)
                .find(|action| {
                    action
                        .strip_prefix(resource)
                        .is_some_and(|rest| rest.strip_prefix('/') == Some(verb))
                });
        }
        _ => return None,
    };
    Some(wanted)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::azure::{
        ArmClient, ArmConfig, Credential, disks, network_interfaces, virtual_machines,
    };

    const ROLE: &str = include_str!("../../../deploy/azure-role.json");

    fn role_actions(key: &str) -> BTreeSet<String> {
        let role: serde_json::Value = serde_json::from_str(ROLE).expect("azure-role.json is JSON");
        role[key]
            .as_array()
            .unwrap_or_else(|| panic!("azure-role.json has no {key} list"))
            .iter()
            .map(|action| action.as_str().expect("actions are strings").to_owned())
            .collect()
    }

    #[test]
    fn the_role_grants_exactly_the_actions_of_the_table() {
        let table = |data: bool| -> BTreeSet<String> {
            PERMISSIONS
                .iter()
                .filter(|permission| permission.data == data)
                .map(|permission| permission.action.to_owned())
                .collect()
        };
        assert_eq!(role_actions("Actions"), table(false), "Actions");
        assert_eq!(role_actions("DataActions"), table(true), "DataActions");
        assert!(role_actions("NotActions").is_empty());
        assert!(role_actions("NotDataActions").is_empty());
        assert!(
            !ROLE.contains('*'),
            "the role names every action, no wildcard"
        );
    }

    /// Every URL the clients build (the same `resource_url` calls with the modules' own resource
    /// types and API versions), and the polling URLs real ARM returns.
    #[test]
    fn the_headroom_reader_role_grants_exactly_the_subscription_scope_reads() {
        let role: serde_json::Value =
            serde_json::from_str(include_str!("../../../deploy/azure-role-headroom.json"))
                .expect("azure-role-headroom.json is JSON");
        let granted: BTreeSet<String> = role["Actions"]
            .as_array()
            .expect("an Actions list")
            .iter()
            .map(|action| action.as_str().expect("actions are strings").to_owned())
            .collect();
        let subscription_scope: BTreeSet<String> = PERMISSIONS
            .iter()
            .filter(|permission| permission.request.contains("subscription scope"))
            .map(|permission| permission.action.to_owned())
            .collect();
        assert_eq!(granted, subscription_scope);
        assert_eq!(subscription_scope.len(), 5);
    }

    #[test]
    fn every_request_the_client_makes_has_its_action_in_the_table() {
        let arm = ArmClient::new(
            ArmConfig::new(
                "https://management.azure.com/".parse().expect("url"),
                "sub",
                "rg",
            ),
            Credential::fixed("t"),
        )
        .expect("client");
        let vm = virtual_machines::RESOURCE_TYPE;
        let disk = disks::RESOURCE_TYPE;
        let nic = network_interfaces::RESOURCE_TYPE;
        let url =
            |kind: &str, segments: &[&str]| arm.resource_url(kind, segments, "v").path().to_owned();
        let disk_by_id = arm
            .id_url(&arm.resource_id(disk, "d1"), "v")
            .path()
            .to_owned();
        let cases: Vec<(&str, String, &str)> = vec![
            ("GET", url(vm, &["m"]), "Microsoft.Compute/virtualMachines/read"),
            ("GET", url(vm, &[]), "Microsoft.Compute/virtualMachines/read"),
            ("PUT", url(vm, &["m"]), "Microsoft.Compute/virtualMachines/write"),
            ("PATCH", url(vm, &["m"]), "Microsoft.Compute/virtualMachines/write"),
            (
                "POST",
                url(vm, &["m", "attachDetachDataDisks"]),
                "Microsoft.Compute/virtualMachines/attachDetachDataDisks/action",
            ),
            ("DELETE", url(vm, &["m"]), "Microsoft.Compute/virtualMachines/delete"),
            (
                "POST",
                url(vm, &["m", "restart"]),
                "Microsoft.Compute/virtualMachines/restart/action",
            ),
            (
                "POST",
                url(vm, &["m", "redeploy"]),
                "Microsoft.Compute/virtualMachines/redeploy/action",
            ),
            (
                "GET",
                "/subscriptions/sub/providers/Microsoft.Compute/virtualMachines".into(),
                "Microsoft.Compute/virtualMachines/read",
            ),
            ("GET", url(disk, &["d"]), "Microsoft.Compute/disks/read"),
            ("GET", disk_by_id, "Microsoft.Compute/disks/read"),
            ("GET", url(disk, &[]), "Microsoft.Compute/disks/read"),
            ("PUT", url(disk, &["d"]), "Microsoft.Compute/disks/write"),
            ("DELETE", url(disk, &["d"]), "Microsoft.Compute/disks/delete"),
            ("GET", url(nic, &["n"]), "Microsoft.Network/networkInterfaces/read"),
            ("GET", url(nic, &[]), "Microsoft.Network/networkInterfaces/read"),
            ("PUT", url(nic, &["n"]), "Microsoft.Network/networkInterfaces/write"),
            ("DELETE", url(nic, &["n"]), "Microsoft.Network/networkInterfaces/delete"),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Compute/locations/westeurope/operations/1".into(),
                "Microsoft.Compute/locations/operations/read",
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Compute/locations/westeurope/DiskOperations/1".into(),
                "Microsoft.Compute/locations/DiskOperations/read",
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Network/locations/westeurope/operations/1".into(),
                "Microsoft.Network/locations/operations/read",
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Network/locations/westeurope/operationResults/1".into(),
                "Microsoft.Network/locations/operationResults/read",
            ),
            (
                "GET",
                "/subscriptions/s/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/usages".into(),
                "Microsoft.Network/virtualNetworks/read",
            ),
            (
                "GET",
                "/subscriptions/s/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes".into(),
                "Microsoft.Network/virtualNetworks/subnets/read",
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Compute/locations/westeurope/usages".into(),
                "Microsoft.Compute/locations/usages/read",
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Compute/skus".into(),
                "Microsoft.Compute/skus/read",
            ),
            (
                "GET",
                "/subscriptions/s/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/node/versions".into(),
                "Microsoft.Compute/galleries/images/versions/read",
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Compute/locations/westeurope/publishers/Canonical/artifacttypes/vmimage/offers/ubuntu-24_04-lts/skus/server/versions".into(),
                "Microsoft.Compute/locations/publishers/artifacttypes/offers/skus/versions/read",
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Compute/locations/westeurope/sharedGalleries/abc-team/Images/ubuntu/versions".into(),
                "Microsoft.Compute/locations/sharedGalleries/images/versions/read",
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Compute/locations/westeurope/communityGalleries/pub-1/Images/ubuntu/versions".into(),
                "Microsoft.Compute/locations/communityGalleries/images/versions/read",
            ),
        ];
        for (method, path, action) in cases {
            assert_eq!(action_for(method, &path), Some(action), "{method} {path}");
        }
        for (method, path) in [
            ("DELETE", url(vm, &[])),
            ("POST", url(vm, &["m", "reimage"])),
            ("GET", "/subscriptions/s/resourceGroups/rg".to_owned()),
            ("PUT", url("Microsoft.Network/virtualNetworks", &["v"])),
        ] {
            assert_eq!(action_for(method, &path), None, "{method} {path}");
        }
    }
}
