//! The pods bound to a Node, listed page by page: what the drain's planner, its waits and the
//! disruption marking read.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use crate::kube::error::{Error, Result};

/// How many objects one list page holds.
const PAGE_SIZE: u32 = 500;

/// Every pod with `spec.nodeName == node`, page by page.
pub(crate) async fn pods_on_node(client: &kube::Client, node: &str) -> Result<Vec<Pod>> {
    let api: Api<Pod> = Api::all(client.clone());
    let mut params = ListParams::default()
        .fields(&format!("spec.nodeName={node}"))
        .limit(PAGE_SIZE);
    let mut pods = Vec::new();
    loop {
        let page = api.list(&params).await.map_err(|source| Error::ListPods {
            node: node.to_owned(),
            source,
        })?;
        pods.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(pods),
        }
    }
}
