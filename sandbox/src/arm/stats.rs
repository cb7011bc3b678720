//! Request statistics (`GET /sandbox/stats`) and the operation names requests are counted under.

use std::collections::BTreeMap;

use axum::http::Method;
use serde::{Deserialize, Serialize};

/// Counts of ARM requests. JSON shape:
/// `{"total":N,"by_operation":{"vm.put":{"201":1}},"by_status":{"201":1}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Every ARM request answered.
    pub total: u64,
    /// Per operation name, per HTTP status.
    pub by_operation: BTreeMap<String, BTreeMap<String, u64>>,
    /// Per HTTP status.
    pub by_status: BTreeMap<String, u64>,
}

impl Stats {
    /// Counts one answered request.
    pub fn record(&mut self, operation: &str, status: u16) {
        let status = status.to_string();
        self.total += 1;
        *self
            .by_operation
            .entry(operation.to_owned())
            .or_default()
            .entry(status.clone())
            .or_default() += 1;
        *self.by_status.entry(status).or_default() += 1;
    }

    /// How many `operation` requests were answered with `status`.
    pub fn count(&self, operation: &str, status: u16) -> u64 {
        self.by_operation
            .get(operation)
            .and_then(|s| s.get(&status.to_string()))
            .copied()
            .unwrap_or(0)
    }
}

/// The operation name of an ARM request, e.g. `vm.put`, `disk.list`, `nic.delete`,
/// `vm.attachDetachDataDisks`, `operation.status`, `operation.result`; `arm.unknown` otherwise.
pub fn operation_name(method: &Method, path: &str) -> String {
    let segments: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(str::to_ascii_lowercase)
        .collect();
    let verb = method.as_str().to_ascii_lowercase();
    if let Some(name) = image_operation(&segments).or_else(|| gallery_operation(&segments, &verb)) {
        return name;
    }
    // /providers/Microsoft.ResourceGraph/resources: a Resource Graph query.
    if segments.len() == 3
        && segments[0] == "providers"
        && segments[1] == "microsoft.resourcegraph"
        && segments[2] == "resources"
    {
        return "graph.query".into();
    }
    // /subscriptions/{s}/providers/{p}/locations/{l}/operations|operationResults/{id}
    if segments.len() == 8 && segments[2] == "providers" && segments[4] == "locations" {
        return match segments[6].as_str() {
            "operations" => "operation.status".into(),
            "operationresults" => "operation.result".into(),
            _ => "arm.unknown".into(),
        };
    }
    // /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/usages: compute usages.
    if segments.len() == 7 && segments[2] == "providers" && segments[6] == "usages" {
        return "usage.list".into();
    }
    // /subscriptions/{s}/providers/{ns}/{type}: a subscription-level list.
    if segments.len() == 5 && segments[2] == "providers" && verb == "get" {
        return match (segments[3].as_str(), segments[4].as_str()) {
            ("microsoft.compute", "virtualmachines") => "vm.listAll".into(),
            ("microsoft.compute", "disks") => "disk.listAll".into(),
            ("microsoft.network", "networkinterfaces") => "nic.listAll".into(),
            ("microsoft.network", "virtualnetworks") => "vnet.listAll".into(),
            ("microsoft.compute", "skus") => "sku.list".into(),
            ("microsoft.compute", "galleries") => "gallery.listAll".into(),
            _ => "arm.unknown".into(),
        };
    }
    // /subscriptions/{s}/resourceGroups/{rg}/providers/{ns}/{type}[/{name}[/{action}]]
    if segments.len() < 7 || segments[2] != "resourcegroups" || segments[4] != "providers" {
        return "arm.unknown".into();
    }
    let prefix = match (segments[5].as_str(), segments[6].as_str()) {
        ("microsoft.compute", "virtualmachines") => "vm",
        ("microsoft.compute", "disks") => "disk",
        ("microsoft.network", "networkinterfaces") => "nic",
        ("microsoft.network", "virtualnetworks") => "vnet",
        _ => return "arm.unknown".into(),
    };
    // …/virtualNetworks/{vnet}/subnets[/{subnet}]
    if prefix == "vnet" && segments.len() >= 9 && segments[8] == "subnets" {
        return match segments.len() {
            9 if verb == "get" => "subnet.list".into(),
            10 => format!("subnet.{verb}"),
            _ => "arm.unknown".into(),
        };
    }
    match segments.len() {
        7 if verb == "get" => format!("{prefix}.list"),
        8 => format!("{prefix}.{verb}"),
        9 => {
            let action = match segments[8].as_str() {
                "instanceview" => "instanceView",
                "attachdetachdatadisks" => "attachDetachDataDisks",
                "deallocate" => "deallocate",
                "start" => "start",
                "poweroff" => "powerOff",
                "restart" => "restart",
                "usages" => "usages",
                "redeploy" => "redeploy",
                "reimage" => "reimage",
                "simulateeviction" => "simulateEviction",
                _ => "unknown",
            };
            format!("{prefix}.{action}")
        }
        _ => "arm.unknown".into(),
    }
}

/// A marketplace image request (`/subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/
/// publishers/…`): `image.listPublishers`, `image.listOffers`, `image.listSkus`,
/// `image.listVersions`, `image.get`.
fn image_operation(segments: &[String]) -> Option<String> {
    if segments.len() < 7
        || segments[2] != "providers"
        || segments[4] != "locations"
        || segments[6] != "publishers"
    {
        return None;
    }
    let name = match segments.len() {
        7 => "image.listPublishers",
        11 => "image.listOffers",
        13 => "image.listSkus",
        15 => "image.listVersions",
        16 => "image.get",
        _ => "arm.unknown",
    };
    Some(name.into())
}

/// A gallery request (`…/resourceGroups/{rg}/providers/Microsoft.Compute/galleries/…`):
/// `gallery.*`, `galleryImage.*`, `galleryImageVersion.*` with `list` or the verb.
fn gallery_operation(segments: &[String], verb: &str) -> Option<String> {
    if segments.len() < 7
        || segments[2] != "resourcegroups"
        || segments[4] != "providers"
        || segments[5] != "microsoft.compute"
        || segments[6] != "galleries"
    {
        return None;
    }
    let name = match (
        segments.len(),
        segments.get(8).map(String::as_str),
        segments.get(10).map(String::as_str),
    ) {
        (7, _, _) => "gallery.list".to_owned(),
        (8, _, _) => format!("gallery.{verb}"),
        (9, Some("images"), _) => "galleryImage.list".to_owned(),
        (10, Some("images"), _) => format!("galleryImage.{verb}"),
        (11, Some("images"), Some("versions")) => "galleryImageVersion.list".to_owned(),
        (12, Some("images"), Some("versions")) => format!("galleryImageVersion.{verb}"),
        _ => "arm.unknown".to_owned(),
    };
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_named_by_resource_and_verb() {
        let vm = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines";
        assert_eq!(operation_name(&Method::GET, vm), "vm.list");
        assert_eq!(
            operation_name(
                &Method::GET,
                "/subscriptions/s/providers/Microsoft.Network/networkInterfaces"
            ),
            "nic.listAll"
        );
        assert_eq!(operation_name(&Method::PUT, &format!("{vm}/a")), "vm.put");
        assert_eq!(
            operation_name(&Method::POST, &format!("{vm}/a/attachDetachDataDisks")),
            "vm.attachDetachDataDisks"
        );
        assert_eq!(
            operation_name(
                &Method::DELETE,
                "/subscriptions/s/resourcegroups/rg/providers/Microsoft.Network/networkInterfaces/n"
            ),
            "nic.delete"
        );
        assert_eq!(
            operation_name(
                &Method::GET,
                "/subscriptions/s/providers/Microsoft.Compute/locations/w/operations/1"
            ),
            "operation.status"
        );
        assert_eq!(operation_name(&Method::GET, "/nope"), "arm.unknown");
        let gallery = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/g";
        assert_eq!(operation_name(&Method::PUT, gallery), "gallery.put");
        assert_eq!(
            operation_name(&Method::GET, &format!("{gallery}/images/i/versions")),
            "galleryImageVersion.list"
        );
        assert_eq!(
            operation_name(&Method::DELETE, &format!("{gallery}/images/i")),
            "galleryImage.delete"
        );
        let skus = "/subscriptions/s/providers/Microsoft.Compute/locations/w/publishers/p/artifacttypes/vmimage/offers/o/skus";
        assert_eq!(operation_name(&Method::GET, skus), "image.listSkus");
        assert_eq!(
            operation_name(&Method::GET, &format!("{skus}/s/versions/1.0")),
            "image.get"
        );
    }

    #[test]
    fn stats_count_per_operation_and_status() {
        let mut stats = Stats::default();
        stats.record("vm.put", 201);
        stats.record("vm.put", 201);
        stats.record("vm.get", 404);
        assert_eq!(stats.total, 3);
        assert_eq!(stats.count("vm.put", 201), 2);
        assert_eq!(stats.by_status["404"], 1);
    }
}
