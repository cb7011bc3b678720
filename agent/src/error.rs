//! The agent's errors, named after the step that failed. Every one is retried by the loop at
//! its next tick (IMDS and the apiserver come back; a bad document is replaced by the next one),
//! so none ends the process once it runs; at start, only the flags can be wrong for good.

use nodewright_model::scheduled_events::DocumentError;

/// What went wrong; the cause is in `source`, never in the message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The HTTP client for IMDS could not be built.
    #[error("cannot build the HTTP client for the metadata service")]
    BuildHttpClient(#[source] reqwest::Error),
    /// The document could not be fetched (IMDS unreachable, timed out, connection cut).
    #[error("cannot read the Scheduled Events document at {url}")]
    GetDocument {
        /// The document's URL.
        url: String,
        /// reqwest's error.
        #[source]
        source: reqwest::Error,
    },
    /// IMDS answered the GET with an error status.
    #[error("the metadata service answered {status} to GET {url}: {body}")]
    DocumentStatus {
        /// The document's URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The document is longer than any real one.
    #[error("the Scheduled Events document is longer than {max} bytes")]
    DocumentTooLong {
        /// The most read.
        max: usize,
    },
    /// The document is not UTF-8 text.
    #[error("the Scheduled Events document is not UTF-8 text")]
    DocumentNotText,
    /// The document is not the Scheduled Events JSON nodewright reads.
    #[error("the Scheduled Events document cannot be read")]
    ParseDocument(#[source] DocumentError),
    /// The acknowledgement could not be sent.
    #[error("cannot acknowledge Scheduled Event {event_id}")]
    PostStartRequest {
        /// The event acknowledged.
        event_id: String,
        /// reqwest's error.
        #[source]
        source: reqwest::Error,
    },
    /// IMDS refused the acknowledgement.
    #[error("the metadata service answered {status} to the acknowledgement of {event_id}: {body}")]
    StartRequestStatus {
        /// The event acknowledged.
        event_id: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The agent's Node could not be read.
    #[error("cannot read Node {node}")]
    GetNode {
        /// The Node.
        node: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
    /// The condition could not be written on the Node's status.
    #[error("cannot write condition {condition} on Node {node}")]
    PatchCondition {
        /// The Node.
        node: String,
        /// The condition's type.
        condition: &'static str,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
    /// The annotation could not be written on the Node.
    #[error("cannot write annotation {annotation} on Node {node}")]
    PatchAnnotation {
        /// The Node.
        node: String,
        /// The annotation's key.
        annotation: &'static str,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
    /// The Kubernetes Event announcing a Scheduled Event could not be created.
    #[error("cannot create the Event announcing Scheduled Event {event_id} of Node {node}")]
    CreateEvent {
        /// The Node.
        node: String,
        /// The Scheduled Event.
        event_id: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
    /// A value could not be written as JSON (never with the agent's own values).
    #[error("cannot write {what} as JSON")]
    Json {
        /// What was written.
        what: &'static str,
        /// serde's error.
        #[source]
        source: serde_json::Error,
    },
}

/// The agent's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;
