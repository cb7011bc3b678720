//! Errors of the node joiner.

/// A step of the node joiner that failed.
///
/// Every variant is retryable: the joiner logs it and tries again on its next pass (at the latest
/// one resync period later), because each step is idempotent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating the Node failed.
    #[error("creating node {node}")]
    CreateNode {
        /// The Node's name.
        node: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// Writing the Node's status (capacity, addresses, node info) through the status subresource
    /// failed.
    #[error("writing the status of node {node}")]
    WriteNodeStatus {
        /// The Node's name.
        node: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// Taking the Node's lease from kwok, or handing it back, failed.
    #[error("updating the lease of node {node}")]
    UpdateLease {
        /// The Node's name.
        node: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// Adding or removing the kwok or heartbeat-stopped annotation failed.
    #[error("patching the annotations of node {node}")]
    PatchNodeAnnotations {
        /// The Node's name.
        node: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// Reading the bootstrap token Secret a VM's token names failed.
    #[error("reading Secret kube-system/{secret} for the bootstrap token of node {node}")]
    ReadTokenSecret {
        /// The Node's name.
        node: String,
        /// The Secret's name.
        secret: String,
        /// The API server's answer.
        #[source]
        source: kube::Error,
    },
    /// Asking the apiserver who the VM's bootstrap token is failed (other than a refusal).
    #[error("authenticating with the bootstrap token of node {node} (Secret kube-system/{secret})")]
    CheckToken {
        /// The Node's name.
        node: String,
        /// The token's Secret.
        secret: String,
        /// The API server's answer, or the transport error.
        #[source]
        source: kube::Error,
    },
}

/// The node joiner's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
