//! ARM paths are case-insensitive: `/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/
//! virtualmachines/vm-1` names the same VM as the canonical spelling (Kubernetes providerIDs and
//! hand-written scripts often lower-case them). The router matches exactly, so requests are
//! rewritten to the canonical spelling of the fixed segments first; resource names keep their
//! casing (the emulator compares ids case-insensitively).

use axum::extract::Request;
use axum::http::Uri;
use axum::http::uri::PathAndQuery;

/// The fixed segments of a resource path, by position after the leading `/`:
/// `subscriptions/{sub}/resourceGroups/{rg}/providers/{namespace}/{type}/{name}/{action}`.
const CANONICAL: &[(usize, &[&str])] = &[
    (0, &["subscriptions"]),
    (2, &["resourceGroups"]),
    (4, &["providers"]),
    (5, &["Microsoft.Compute", "Microsoft.Network"]),
    (
        6,
        &[
            "virtualMachines",
            "disks",
            "networkInterfaces",
            "virtualNetworks",
            "galleries",
        ],
    ),
    (
        8,
        &[
            "images",
            "instanceView",
            "attachDetachDataDisks",
            "deallocate",
            "start",
            "powerOff",
            "restart",
            "subnets",
            "usages",
            "redeploy",
            "reimage",
            "simulateEviction",
        ],
    ),
    (10, &["versions"]),
];

/// The fixed segments of a subscription-level list's path:
/// `subscriptions/{sub}/providers/{namespace}/{type}`.
const CANONICAL_SUBSCRIPTION: &[(usize, &[&str])] = &[
    (0, &["subscriptions"]),
    (2, &["providers"]),
    (3, &["Microsoft.Compute", "Microsoft.Network"]),
    (
        4,
        &[
            "virtualMachines",
            "disks",
            "networkInterfaces",
            "virtualNetworks",
        ],
    ),
    (4, &["skus", "locations"]),
    (6, &["usages"]),
    (4, &["galleries"]),
    (6, &["publishers"]),
    (8, &["artifacttypes"]),
    (9, &["vmimage"]),
    (10, &["offers"]),
    (12, &["skus"]),
    (14, &["versions"]),
];

/// The Resource Graph route, as the emulator spells it (a request in any casing is respelled to
/// it).
pub const RESOURCE_GRAPH: &str = "/providers/Microsoft.ResourceGraph/resources";

/// `request` with the fixed segments of its path spelled canonically; other requests unchanged.
pub fn canonicalize(mut request: Request) -> Request {
    if let Some(uri) = canonical_uri(request.uri()) {
        *request.uri_mut() = uri;
    }
    request
}

/// The canonical URI, or `None` when `uri` is already canonical or not a resource path.
fn canonical_uri(uri: &Uri) -> Option<Uri> {
    let path = canonical_path(uri.path())?;
    let path_and_query = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(path_and_query.parse::<PathAndQuery>().ok()?);
    Uri::from_parts(parts).ok()
}

fn canonical_path(path: &str) -> Option<String> {
    if path.eq_ignore_ascii_case(RESOURCE_GRAPH) && path != RESOURCE_GRAPH {
        return Some(RESOURCE_GRAPH.to_owned());
    }
    let mut segments: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
    if !segments
        .first()
        .is_some_and(|first| first.eq_ignore_ascii_case("subscriptions"))
    {
        return None;
    }
    let mut changed = false;
    let subscription_level = segments
        .get(2)
        .is_some_and(|segment| segment.eq_ignore_ascii_case("providers"));
    let table = if subscription_level {
        CANONICAL_SUBSCRIPTION
    } else {
        CANONICAL
    };
    for (position, spellings) in table {
        let Some(segment) = segments.get(*position) else {
            continue;
        };
        let canonical = spellings
            .iter()
            .find(|spelling| spelling.eq_ignore_ascii_case(segment));
        if let Some(canonical) = canonical.filter(|canonical| *canonical != segment) {
            segments[*position] = canonical;
            changed = true;
        }
    }
    changed.then(|| format!("/{}", segments.join("/")))
}

/// The VM name a path addresses, if any.
pub(crate) fn vm_in_path(path: &str) -> Option<&str> {
    let mut segments = path.split('/');
    segments.find(|s| s.eq_ignore_ascii_case("virtualMachines"))?;
    segments.next().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(path: &str, expected: Option<&str>) {
        assert_eq!(canonical_path(path).as_deref(), expected, "{path}");
    }

    #[test]
    fn a_subscription_level_list_is_respelled_too() {
        check(
            "/subscriptions/S/providers/microsoft.compute/virtualmachines",
            Some("/subscriptions/S/providers/Microsoft.Compute/virtualMachines"),
        );
        check(
            "/subscriptions/S/providers/Microsoft.Network/networkInterfaces",
            None,
        );
    }

    #[test]
    fn fixed_segments_are_respelled_and_names_keep_their_case() {
        check(
            "/subscriptions/S/resourcegroups/RG/providers/microsoft.compute/virtualmachines/Web-1",
            Some(
                "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/Web-1",
            ),
        );
        check(
            "/SUBSCRIPTIONS/s/RESOURCEGROUPS/rg/PROVIDERS/MICROSOFT.NETWORK/NETWORKINTERFACES/nic",
            Some(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/nic",
            ),
        );
        check(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm/poweroff",
            Some(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm/powerOff",
            ),
        );
    }

    #[test]
    fn gallery_and_marketplace_image_paths_are_respelled() {
        check(
            "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/Galleries/G/Images/I/Versions/1.0.0",
            Some(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/galleries/G/images/I/versions/1.0.0",
            ),
        );
        check(
            "/Subscriptions/s/Providers/Microsoft.Compute/Locations/westeurope/Publishers/Canonical/ArtifactTypes/VMImage/Offers/o/Skus/s/Versions",
            Some(
                "/subscriptions/s/providers/Microsoft.Compute/locations/westeurope/publishers/Canonical/artifacttypes/vmimage/offers/o/skus/s/versions",
            ),
        );
    }

    #[test]
    fn canonical_and_foreign_paths_are_left_alone() {
        check(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/Start",
            None,
        );
        check("/sandbox/stats", None);
        check("/healthz", None);
        // A VM named like an action keeps its name: names are never respelled.
        check(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/Start",
            None,
        );
    }

    #[test]
    fn the_query_survives_the_rewrite() {
        let uri: Uri = "http://h/subscriptions/s/resourcegroups/rg/providers/Microsoft.Compute/disks/d?api-version=2024-03-02"
            .parse()
            .unwrap();
        let rewritten = canonical_uri(&uri).unwrap();
        assert_eq!(
            rewritten.path(),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d"
        );
        assert_eq!(rewritten.query(), Some("api-version=2024-03-02"));
    }
}
