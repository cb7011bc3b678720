//! The Nodes' Leases in `kube-node-lease`: the kubelet renews its Node's Lease (of the Node's
//! name) about every 10 s, so a Lease not renewed for a while is the earliest sign of a dead
//! kubelet, earlier than the Ready condition (node-lifecycle waits 40 s and more).
//!
//! A pool controller asks for a lease timeout; a Node whose Lease was last renewed longer ago
//! than that is reported with the renewal time ([`stale_since`]). A fresh Lease and a Node without
//! a Lease report nothing, so a healthy Node's entry does not change at every renewal (a Node
//! without a Lease is judged by its conditions).

use std::collections::HashMap;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::ListParams;

use super::error::{Error, Result};

/// The namespace of the Nodes' Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// When each Lease was last renewed, Unix seconds, by its name (= its Node's).
pub type Renewals = HashMap<String, i64>;

/// Lists the Leases of `kube-node-lease` (one list call) and reads when each was last renewed.
pub(crate) async fn list_renewals(client: &kube::Client) -> Result<Renewals> {
    let api: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(Error::ListNodeLeases)?;
    Ok(listed.items.iter().filter_map(renewal).collect())
}

/// The Lease's name and when it was last renewed (its `renewTime`, else its `acquireTime`),
/// Unix seconds; none for a Lease with neither (or no name).
pub(crate) fn renewal(lease: &Lease) -> Option<(String, i64)> {
    let name = lease.metadata.name.clone()?;
    let spec = lease.spec.as_ref()?;
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?;
    Some((name, renewed.0.as_second()))
}

/// The renewal time `renewed` (Unix seconds) when it is older than `timeout_secs` at `now`;
/// none when it is fresh, or when there is no Lease (`renewed` none).
pub(crate) fn stale_since(renewed: Option<i64>, timeout_secs: u64, now: i64) -> Option<i64> {
    let timeout = i64::try_from(timeout_secs).unwrap_or(i64::MAX);
    renewed.filter(|renewed| now.saturating_sub(*renewed) > timeout)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn lease(spec: Value) -> Lease {
        serde_json::from_value(json!({
            "metadata": { "name": "web-abcde", "namespace": NODE_LEASE_NAMESPACE },
            "spec": spec,
        }))
        .unwrap_or_default()
    }

    #[test]
    fn a_lease_is_renewed_at_its_renew_time_else_its_acquire_time() {
        let table = [
            (
                "renewed",
                json!({ "holderIdentity": "web-abcde", "leaseDurationSeconds": 40,
                        "acquireTime": "2026-01-01T00:00:00.000000Z",
                        "renewTime": "2026-01-02T03:04:05.500000Z" }),
                Some(1_767_323_045),
            ),
            (
                "acquired, never renewed",
                json!({ "acquireTime": "2026-01-01T00:00:00.000000Z" }),
                Some(1_767_225_600),
            ),
            ("neither", json!({ "holderIdentity": "web-abcde" }), None),
        ];
        for (case, spec, expected) in table {
            assert_eq!(
                renewal(&lease(spec)),
                expected.map(|at| ("web-abcde".to_owned(), at)),
                "{case}"
            );
        }
        let mut nameless = lease(json!({ "renewTime": "2026-01-02T03:04:05.000000Z" }));
        nameless.metadata.name = None;
        assert_eq!(renewal(&nameless), None, "no name");
        let mut no_spec = lease(json!({}));
        no_spec.spec = None;
        assert_eq!(renewal(&no_spec), None, "no spec");
    }

    #[test]
    fn a_lease_is_stale_once_its_renewal_is_older_than_the_timeout() {
        let now = 1_000_000;
        let table = [
            ("renewed just now", Some(now), 60, None),
            ("renewed 10 s ago", Some(now - 10), 60, None),
            ("exactly the timeout ago", Some(now - 60), 60, None),
            (
                "a second past the timeout",
                Some(now - 61),
                60,
                Some(now - 61),
            ),
            ("long ago", Some(0), 60, Some(0)),
            ("no lease", None, 60, None),
            ("renewed in the future (clock skew)", Some(now + 5), 0, None),
            (
                "a zero timeout, renewed a second ago",
                Some(now - 1),
                0,
                Some(now - 1),
            ),
            ("a timeout beyond any clock", Some(i64::MIN), u64::MAX, None),
        ];
        for (case, renewed, timeout, expected) in table {
            assert_eq!(stale_since(renewed, timeout, now), expected, "{case}");
        }
    }
}
