//! The `verb` and `resource` labels of an apiserver request in nodewright's metrics, read from
//! its method, path and query the way the apiserver's own `apiserver_request_total` names them
//! (`list`, `watch`, `get`, `create`, `update`, `patch`, `delete`, `deletecollection`;
//! `pods/eviction` for a subresource), never an object's name or namespace.

/// `(verb, resource)` of a `method` request to `path` with `query` (without the `?`).
/// A path outside `/api` and `/apis` (e.g. `/readyz`) is the resource `nonresource`.
pub fn kube_request_labels(method: &str, path: &str, query: &str) -> (&'static str, String) {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segments.first() {
        Some(&"api") => segments.get(2..),
        Some(&"apis") => segments.get(3..),
        _ => None,
    };
    let Some(mut rest) = rest.filter(|rest| !rest.is_empty()) else {
        return (verb(method, true, query), "nonresource".to_owned());
    };
    if rest[0] == "namespaces" && rest.len() >= 3 {
        rest = &rest[2..];
    }
    let resource = match rest {
        [resource, _, subresource, ..] => format!("{resource}/{subresource}"),
        [resource, ..] => (*resource).to_owned(),
        [] => String::new(),
    };
    let well_formed = !resource.is_empty()
        && resource.len() <= 64
        && resource
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '/' || c == '.');
    let resource = if well_formed {
        resource
    } else {
        "other".to_owned()
    };
    (verb(method, rest.len() >= 2, query), resource)
}

fn verb(method: &str, named: bool, query: &str) -> &'static str {
    let watching = query
        .split('&')
        .any(|pair| pair == "watch=true" || pair == "watch=1");
    match (method.to_ascii_uppercase().as_str(), named) {
        ("GET", _) if watching => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_verb_and_resource_never_the_object() {
        let cases = [
            ("GET", "/api/v1/nodes/blue-bcdfg", "", "get", "nodes"),
            (
                "GET",
                "/api/v1/nodes",
                "labelSelector=a%3Db",
                "list",
                "nodes",
            ),
            (
                "GET",
                "/api/v1/namespaces/shop/pods",
                "fieldSelector=x&watch=true&resourceVersion=5",
                "watch",
                "pods",
            ),
            (
                "POST",
                "/api/v1/namespaces/shop/pods/web-0/eviction",
                "",
                "create",
                "pods/eviction",
            ),
            (
                "PATCH",
                "/api/v1/nodes/blue-bcdfg/status",
                "",
                "patch",
                "nodes/status",
            ),
            (
                "POST",
                "/apis/events.k8s.io/v1/namespaces/default/events",
                "",
                "create",
                "events",
            ),
            (
                "DELETE",
                "/apis/storage.k8s.io/v1/volumeattachments/csi-1",
                "",
                "delete",
                "volumeattachments",
            ),
            (
                "GET",
                "/api/v1/namespaces/kube-system",
                "",
                "get",
                "namespaces",
            ),
            ("GET", "/api/v1/namespaces", "", "list", "namespaces"),
            (
                "DELETE",
                "/api/v1/namespaces/x/pods",
                "",
                "deletecollection",
                "pods",
            ),
            (
                "PUT",
                "/apis/coordination.k8s.io/v1/namespaces/n/leases/l",
                "",
                "update",
                "leases",
            ),
            ("GET", "/readyz", "", "get", "nonresource"),
            ("GET", "/version", "", "get", "nonresource"),
            ("GET", "/api/v1/Nodes/x", "", "get", "other"),
        ];
        for (method, path, query, verb, resource) in cases {
            assert_eq!(
                kube_request_labels(method, path, query),
                (verb, resource.to_owned()),
                "{method} {path}?{query}"
            );
        }
    }
}
