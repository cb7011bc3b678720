//! What the preflight job reports: can this worker reach and use everything it needs?

use serde::{Deserialize, Serialize};

/// The worker's view of the Kubernetes cluster it manages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesReport {
    /// The apiserver's version, e.g. `v1.36.3`.
    pub server_version: String,
    /// Nodes registered.
    pub nodes: usize,
    /// Nodes whose `Ready` condition is `True`.
    pub ready_nodes: usize,
}

/// The result of a preflight run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreflightReport {
    /// The cluster the worker is configured for.
    pub cluster: String,
    /// The Kubernetes side.
    pub kubernetes: KubernetesReport,
}
