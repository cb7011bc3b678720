//! Reads what the preflight job reports about the cluster.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use nodewright_model::preflight::KubernetesReport;

use super::{Error, Result};

/// Reads the apiserver version and counts nodes, paging through the list.
pub(super) async fn inspect_cluster(client: &kube::Client) -> Result<KubernetesReport> {
    let version = client
        .apiserver_version()
        .await
        .map_err(Error::GetVersion)?;
    let nodes: Api<Node> = Api::all(client.clone());
    let (mut total, mut ready) = (0, 0);
    let mut params = ListParams::default().limit(500);
    loop {
        let page = nodes.list(&params).await.map_err(Error::ListNodes)?;
        total += page.items.len();
        ready += page.items.iter().filter(|node| is_ready(node)).count();
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    Ok(KubernetesReport {
        server_version: version.git_version,
        nodes: total,
        ready_nodes: ready,
    })
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}
