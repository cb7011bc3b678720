//! The `operation` label of an ARM request in nodewright's metrics: the resource type a path
//! names and what the request does to it (`virtualMachines.put`, `virtualMachines.list`,
//! `virtualMachines.restart`, `operations.get`), never a resource's name.

/// The label of a `method` request to `path` (an ARM URL's path, without its query).
///
/// The segments after the last `providers/<namespace>` (or the whole path when it has none)
/// alternate type and name: a path ending on a type is a collection (`list` for a GET), one
/// ending on a name is a resource (the method in lower case), and a POST one segment past a
/// resource is that resource's action. Anything not spelled like a type gives `other`.
pub fn arm_operation_label(method: &str, path: &str) -> String {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let after_provider = segments
        .iter()
        .rposition(|segment| segment.eq_ignore_ascii_case("providers"))
        .map(|at| at + 2)
        .unwrap_or(0);
    let rest = segments.get(after_provider..).unwrap_or_default();
    let method = method.to_ascii_lowercase();
    let label = match rest.len() {
        0 => return "other".to_owned(),
        n if n % 2 == 0 => format!("{}.{method}", rest[n - 2]),
        n if n >= 3 && method == "post" => format!("{}.{}", rest[n - 3], rest[n - 1]),
        n if method == "get" => format!("{}.list", rest[n - 1]),
        n => format!("{}.{method}", rest[n - 1]),
    };
    let well_formed =
        label.len() <= 64 && label.chars().all(|c| c.is_ascii_alphabetic() || c == '.');
    if well_formed {
        label
    } else {
        "other".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RG: &str = "/subscriptions/0000/resourceGroups/rg-a";

    #[test]
    fn a_label_names_the_type_and_what_was_done_never_the_name() {
        let vm = format!("{RG}/providers/Microsoft.Compute/virtualMachines/blue-bcdfg");
        let cases = [
            ("PUT", vm.clone(), "virtualMachines.put"),
            ("GET", vm.clone(), "virtualMachines.get"),
            ("DELETE", vm.clone(), "virtualMachines.delete"),
            ("POST", format!("{vm}/restart"), "virtualMachines.restart"),
            ("POST", format!("{vm}/redeploy"), "virtualMachines.redeploy"),
            (
                "GET",
                format!("{RG}/providers/Microsoft.Compute/virtualMachines"),
                "virtualMachines.list",
            ),
            (
                "PATCH",
                format!("{RG}/providers/Microsoft.Compute/disks/blue-bcdfg-os"),
                "disks.patch",
            ),
            (
                "GET",
                "/subscriptions/0000/providers/Microsoft.Compute/locations/westeurope/operations/6f1c-aa".to_owned(),
                "operations.get",
            ),
            (
                "GET",
                "/subscriptions/0000/providers/Microsoft.Compute/locations/westeurope/usages".to_owned(),
                "usages.list",
            ),
            ("GET", RG.to_owned(), "resourceGroups.get"),
            (
                "POST",
                "/providers/Microsoft.ResourceGraph/resources".to_owned(),
                "resources.post",
            ),
            (
                "GET",
                format!("{RG}/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes"),
                "subnets.get",
            ),
            ("GET", "/".to_owned(), "other"),
            (
                "GET",
                format!("{RG}/providers/Microsoft.Compute/virtual-machines/x"),
                "other",
            ),
        ];
        for (method, path, expected) in cases {
            assert_eq!(
                arm_operation_label(method, &path),
                expected,
                "{method} {path}"
            );
        }
    }
}
