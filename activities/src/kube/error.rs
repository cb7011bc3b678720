//! Errors of the Kubernetes activities, named after the step that failed.
//!
//! Retryable: transport errors, 408, 409 (conflict), 429 and 5xx answers. Every other API answer
//! (400, 401, 403, 404 on a read, 422) is not, because a retry would get the same answer.
//! Neither are the findings without an API error (`ForeignNode`, `TaintNodeLost`,
//! `Revisions`).

use crate::failure::{Failure, Retry};
use nodewright_model::text::quoted;
use temporalio_sdk::activities::ActivityError;

/// An error from a Kubernetes activity.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading `/version` failed.
    #[error("reading the Kubernetes apiserver version failed")]
    GetVersion(#[source] kube::Error),
    /// Listing nodes failed.
    #[error("listing Kubernetes nodes failed")]
    ListNodes(#[source] kube::Error),
    /// Reading one Node failed.
    #[error("reading Node {name} failed")]
    GetNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Applying labels and annotations (server-side apply) failed.
    #[error("applying labels and annotations to Node {name} failed")]
    ApplyNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing the pool's taints into the Node's (merge patch with the `resourceVersion` read)
    /// failed; a 409 here means the Node kept changing through every attempt.
    #[error("writing the taints of Node {name} failed")]
    TaintNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Between applying the labels and writing the taints the Node was deleted or lost its
    /// `nodewright.io/machine` label: its taints were not written.
    #[error(
        "Node {name} was deleted or lost its nodewright.io/machine label while its taints were written"
    )]
    TaintNodeLost {
        /// The Node.
        name: String,
    },
    /// Cordoning failed.
    #[error("cordoning Node {name} failed")]
    CordonNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Deleting the Node object failed.
    #[error("deleting Node {name} failed")]
    DeleteNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Cordoning and tainting the Node for a drain failed.
    #[error("cordoning and tainting Node {name} for a drain failed")]
    PrepareNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Setting the Node's `Terminating` condition failed.
    #[error("setting the Terminating condition of Node {name} failed")]
    MarkNodeTerminating {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Making the Node schedulable again and removing the draining taint failed.
    #[error("uncordoning Node {name} failed")]
    UncordonNode {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Removing the Node's `Terminating` condition failed.
    #[error("removing the Terminating condition of Node {name} failed")]
    ClearNodeTerminating {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Listing the pods bound to a Node failed.
    #[error("listing the pods of Node {node} failed")]
    ListPods {
        /// The Node.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Reading one pod failed.
    #[error("reading pod {pod} failed")]
    GetPod {
        /// `namespace/name`.
        pod: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Reading a pod's Namespace (for its labels) failed.
    #[error("reading Namespace {name} failed")]
    GetNamespace {
        /// The Namespace.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Reading a PersistentVolumeClaim failed.
    #[error("reading PersistentVolumeClaim {claim} failed")]
    GetClaim {
        /// `namespace/name`.
        claim: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Reading a PersistentVolume failed.
    #[error("reading PersistentVolume {name} failed")]
    GetVolume {
        /// The PersistentVolume.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Reading a CSI driver's CSIDriver object failed (its absence is not an error).
    #[error("reading CSIDriver {name} failed")]
    GetCsiDriver {
        /// The CSI driver.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Asking for a pod's eviction failed (other than 404, a UID mismatch, or 429).
    #[error("evicting pod {pod} failed")]
    EvictPod {
        /// `namespace/name`.
        pod: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Listing the PodDisruptionBudgets of a namespace failed.
    #[error("listing the PodDisruptionBudgets of namespace {namespace} failed")]
    ListPdbs {
        /// The namespace.
        namespace: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Deleting a pod failed (other than 404 or a UID mismatch).
    #[error("deleting pod {pod} failed")]
    DeletePod {
        /// `namespace/name`.
        pod: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Listing VolumeAttachments failed.
    #[error("listing VolumeAttachments failed")]
    ListVolumeAttachments(#[source] kube::Error),
    /// Deleting a VolumeAttachment failed (other than 404).
    #[error("deleting VolumeAttachment {name} failed")]
    DeleteVolumeAttachment {
        /// The VolumeAttachment.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Listing PersistentVolumes failed.
    #[error("listing PersistentVolumes failed")]
    ListVolumes(#[source] kube::Error),
    /// Listing the Nodes of a pool (by its label) failed.
    #[error("listing the Nodes of pool {pool} failed")]
    ListPoolNodes {
        /// The pool.
        pool: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Listing the Nodes' Leases (namespace `kube-node-lease`) failed.
    #[error("listing the Node Leases of namespace kube-node-lease failed")]
    ListNodeLeases(#[source] kube::Error),
    /// Watching the Nodes of a pool (by its label) failed, or the watch answered an error other
    /// than 410 Gone (which lists again).
    #[error("watching the Nodes of pool {pool} failed")]
    WatchPoolNodes {
        /// The pool.
        pool: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Watching the Nodes' Leases (namespace `kube-node-lease`) failed, or the watch answered an
    /// error other than 410 Gone (which lists again).
    #[error("watching the Node Leases of namespace kube-node-lease failed")]
    WatchNodeLeases(#[source] kube::Error),
    /// Adding or removing the `nodewright.io/outdated` taint failed.
    #[error("changing the outdated taint of Node {name} failed")]
    MarkOutdated {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing the pool's drain settings on a Node failed.
    #[error("writing the drain settings on Node {name} failed")]
    RestampDrain {
        /// The Node.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Creating a Kubernetes Event about a Node failed.
    #[error("creating the Event {event} about Node {name} failed")]
    CreateEvent {
        /// The Node.
        name: String,
        /// The Event's name.
        event: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Reading a pool's revisions ConfigMap failed.
    #[error("reading the revisions ConfigMap {config_map} failed")]
    ReadRevisions {
        /// `<namespace>/<name>`.
        config_map: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing a pool's revisions ConfigMap failed (a 409 here means it kept changing through
    /// every attempt).
    #[error("writing the revisions ConfigMap {config_map} failed")]
    WriteRevisions {
        /// `<namespace>/<name>`.
        config_map: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The revisions ConfigMap is someone else's, or holds a revision that does not parse: it
    /// is not written (the message names it, the key and the fix).
    #[error("{0}")]
    Revisions(nodewright_model::rollout::RevisionsError),
    /// A Node of that name exists for another machine.
    #[error(
        "Node {name} exists with {}, not {}: another machine uses the name; nodewright does not touch it",
        found.as_deref().map_or_else(|| "no providerID".to_owned(), |found| format!("providerID {}", quoted(found))),
        quoted(expected)
    )]
    ForeignNode {
        /// The Node.
        name: String,
        /// Its providerID.
        found: Option<String>,
        /// The VM's providerID.
        expected: String,
    },
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The variant's name, used as the failure type in Temporal.
    fn type_name(&self) -> &'static str {
        match self {
            Error::GetVersion(_) => "GetVersion",
            Error::ListNodes(_) => "ListNodes",
            Error::GetNode { .. } => "GetNode",
            Error::ApplyNode { .. } => "ApplyNode",
            Error::TaintNode { .. } => "TaintNode",
            Error::TaintNodeLost { .. } => "TaintNodeLost",
            Error::CordonNode { .. } => "CordonNode",
            Error::DeleteNode { .. } => "DeleteNode",
            Error::PrepareNode { .. } => "PrepareNode",
            Error::MarkNodeTerminating { .. } => "MarkNodeTerminating",
            Error::UncordonNode { .. } => "UncordonNode",
            Error::ClearNodeTerminating { .. } => "ClearNodeTerminating",
            Error::ListPods { .. } => "ListPods",
            Error::GetPod { .. } => "GetPod",
            Error::GetNamespace { .. } => "GetNamespace",
            Error::GetClaim { .. } => "GetClaim",
            Error::GetVolume { .. } => "GetVolume",
            Error::GetCsiDriver { .. } => "GetCsiDriver",
            Error::EvictPod { .. } => "EvictPod",
            Error::ListPdbs { .. } => "ListPdbs",
            Error::DeletePod { .. } => "DeletePod",
            Error::ListVolumeAttachments(_) => "ListVolumeAttachments",
            Error::DeleteVolumeAttachment { .. } => "DeleteVolumeAttachment",
            Error::ListVolumes(_) => "ListVolumes",
            Error::ListPoolNodes { .. } => "ListPoolNodes",
            Error::ListNodeLeases(_) => "ListNodeLeases",
            Error::WatchPoolNodes { .. } => "WatchPoolNodes",
            Error::WatchNodeLeases(_) => "WatchNodeLeases",
            Error::MarkOutdated { .. } => "MarkOutdated",
            Error::RestampDrain { .. } => "RestampDrain",
            Error::CreateEvent { .. } => "CreateEvent",
            Error::ReadRevisions { .. } => "ReadRevisions",
            Error::WriteRevisions { .. } => "WriteRevisions",
            Error::Revisions(_) => "Revisions",
            Error::ForeignNode { .. } => "ForeignNode",
        }
    }

    fn source_error(&self) -> Option<&kube::Error> {
        match self {
            Error::GetVersion(source)
            | Error::ListNodes(source)
            | Error::ListVolumes(source)
            | Error::ListVolumeAttachments(source)
            | Error::ListNodeLeases(source)
            | Error::WatchNodeLeases(source) => Some(source),
            Error::GetNode { source, .. }
            | Error::ApplyNode { source, .. }
            | Error::TaintNode { source, .. }
            | Error::CordonNode { source, .. }
            | Error::DeleteNode { source, .. }
            | Error::PrepareNode { source, .. }
            | Error::MarkNodeTerminating { source, .. }
            | Error::UncordonNode { source, .. }
            | Error::ClearNodeTerminating { source, .. } => Some(source),
            Error::ListPods { source, .. }
            | Error::GetPod { source, .. }
            | Error::GetNamespace { source, .. }
            | Error::GetClaim { source, .. }
            | Error::GetVolume { source, .. }
            | Error::GetCsiDriver { source, .. }
            | Error::EvictPod { source, .. }
            | Error::ListPdbs { source, .. }
            | Error::DeletePod { source, .. }
            | Error::DeleteVolumeAttachment { source, .. } => Some(source),
            Error::ListPoolNodes { source, .. }
            | Error::WatchPoolNodes { source, .. }
            | Error::MarkOutdated { source, .. }
            | Error::RestampDrain { source, .. }
            | Error::CreateEvent { source, .. }
            | Error::ReadRevisions { source, .. }
            | Error::WriteRevisions { source, .. } => Some(source),
            Error::ForeignNode { .. } | Error::TaintNodeLost { .. } | Error::Revisions(_) => None,
        }
    }

    /// Classifies the error and turns it into the activity's failure.
    pub fn into_activity_error(self) -> ActivityError {
        let retry = self.source_error().map_or(Retry::NonRetryable, retry_for);
        let type_name = self.type_name();
        match self.api_answer() {
            Some(message) => Failure {
                type_name,
                retry,
                retry_after: None,
                error: Answered(message),
            }
            .into(),
            None => Failure {
                type_name,
                retry,
                retry_after: None,
                error: self,
            }
            .into(),
        }
    }

    /// For an apiserver answer: the step, then the apiserver's own words and status, e.g.
    /// `evicting pod ns/web-0 failed: pods "web-0" is forbidden: User "…" cannot create resource
    /// "pods/eviction" in API group "" in the namespace "ns" (HTTP 403 Forbidden)`. kube's own
    /// text of such an error repeats the message inside a debug dump of the whole `Status`.
    fn api_answer(&self) -> Option<String> {
        match self.source_error() {
            Some(kube::Error::Api(status)) if !status.message.is_empty() => Some(format!(
                "{self}: {} (HTTP {} {})",
                status.message, status.code, status.reason
            )),
            _ => None,
        }
    }
}

/// A failure whose whole text is already written (see [`Error::api_answer`]).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Answered(String);

/// Whether a retry can fix a failed Kubernetes call.
fn retry_for(error: &kube::Error) -> Retry {
    match error {
        kube::Error::Api(status) => retry_for_status(status.code),
        _ => Retry::Retryable,
    }
}

fn retry_for_status(code: u16) -> Retry {
    match code {
        408 | 409 | 429 | 500..=599 => Retry::Retryable,
        _ => Retry::NonRetryable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_answers_are_classified_by_status_code() {
        let table = [
            (400, Retry::NonRetryable),
            (401, Retry::NonRetryable),
            (403, Retry::NonRetryable),
            (404, Retry::NonRetryable),
            (408, Retry::Retryable),
            (409, Retry::Retryable),
            (422, Retry::NonRetryable),
            (429, Retry::Retryable),
            (500, Retry::Retryable),
            (503, Retry::Retryable),
        ];
        for (code, expected) in table {
            assert_eq!(retry_for_status(code), expected, "HTTP {code}");
        }
    }

    #[test]
    fn an_api_answer_is_shown_in_the_apiservers_words_once() {
        let message = r#"pods "web-0" is forbidden: User "system:serviceaccount:nodewright:nodewright-worker" cannot create resource "pods/eviction" in API group "" in the namespace "shop""#;
        let error = Error::EvictPod {
            pod: "shop/web-0".to_owned(),
            source: kube::Error::Api(Box::new(kube::core::Status {
                code: 403,
                message: message.to_owned(),
                reason: "Forbidden".to_owned(),
                ..Default::default()
            })),
        };
        assert_eq!(
            error.api_answer().as_deref(),
            Some(
                format!("evicting pod shop/web-0 failed: {message} (HTTP 403 Forbidden)").as_str()
            )
        );
        let silent = Error::ListNodes(kube::Error::Api(Box::new(kube::core::Status {
            code: 500,
            ..Default::default()
        })));
        assert_eq!(silent.api_answer(), None);
    }

    #[test]
    fn a_foreign_node_names_its_provider_id_in_words() {
        let foreign = |found: Option<&str>| {
            Error::ForeignNode {
                name: "web-abcde".to_owned(),
                found: found.map(str::to_owned),
                expected: "azure:///vm/web-abcde".to_owned(),
            }
            .to_string()
        };
        assert_eq!(
            foreign(Some("azure:///vm/other")),
            r#"Node web-abcde exists with providerID "azure:///vm/other", not "azure:///vm/web-abcde": another machine uses the name; nodewright does not touch it"#
        );
        assert_eq!(
            foreign(None),
            r#"Node web-abcde exists with no providerID, not "azure:///vm/web-abcde": another machine uses the name; nodewright does not touch it"#
        );
    }

    #[test]
    fn every_variant_is_named_after_its_step() {
        let forbidden = || {
            kube::Error::Api(Box::new(kube::core::Status {
                code: 403,
                ..Default::default()
            }))
        };
        let table = [
            (Error::GetVersion(forbidden()), "GetVersion"),
            (Error::ListNodes(forbidden()), "ListNodes"),
        ];
        for (error, expected) in table {
            assert_eq!(error.type_name(), expected);
            assert_eq!(
                error.source_error().map(retry_for),
                Some(Retry::NonRetryable)
            );
        }
    }

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..Default::default()
        }))
    }

    fn drain_variants(code: u16) -> Vec<(Error, &'static str)> {
        let name = || "web-abcde".to_owned();
        let pod = || "shop/web-1".to_owned();
        let source = || api_error(code);
        vec![
            (
                Error::PrepareNode {
                    name: name(),
                    source: source(),
                },
                "PrepareNode",
            ),
            (
                Error::MarkNodeTerminating {
                    name: name(),
                    source: source(),
                },
                "MarkNodeTerminating",
            ),
            (
                Error::UncordonNode {
                    name: name(),
                    source: source(),
                },
                "UncordonNode",
            ),
            (
                Error::ClearNodeTerminating {
                    name: name(),
                    source: source(),
                },
                "ClearNodeTerminating",
            ),
            (
                Error::ListPods {
                    node: name(),
                    source: source(),
                },
                "ListPods",
            ),
            (
                Error::GetPod {
                    pod: pod(),
                    source: source(),
                },
                "GetPod",
            ),
            (
                Error::GetNamespace {
                    name: "shop".to_owned(),
                    source: source(),
                },
                "GetNamespace",
            ),
            (
                Error::GetClaim {
                    claim: "shop/data".to_owned(),
                    source: source(),
                },
                "GetClaim",
            ),
            (
                Error::GetVolume {
                    name: "pv-1".to_owned(),
                    source: source(),
                },
                "GetVolume",
            ),
            (
                Error::GetCsiDriver {
                    name: "file.csi.azure.com".to_owned(),
                    source: source(),
                },
                "GetCsiDriver",
            ),
            (
                Error::EvictPod {
                    pod: pod(),
                    source: source(),
                },
                "EvictPod",
            ),
            (
                Error::ListPdbs {
                    namespace: "shop".to_owned(),
                    source: source(),
                },
                "ListPdbs",
            ),
            (
                Error::DeletePod {
                    pod: pod(),
                    source: source(),
                },
                "DeletePod",
            ),
            (
                Error::ListVolumeAttachments(source()),
                "ListVolumeAttachments",
            ),
            (
                Error::DeleteVolumeAttachment {
                    name: "csi-0123".to_owned(),
                    source: source(),
                },
                "DeleteVolumeAttachment",
            ),
        ]
    }

    #[test]
    fn rollout_variants_are_named_after_their_step_and_classified_by_the_answer() {
        for (code, expected) in [
            (403, Retry::NonRetryable),
            (409, Retry::Retryable),
            (429, Retry::Retryable),
            (503, Retry::Retryable),
        ] {
            let table = [
                (
                    Error::ListPoolNodes {
                        pool: "web".to_owned(),
                        source: api_error(code),
                    },
                    "ListPoolNodes",
                ),
                (
                    Error::MarkOutdated {
                        name: "web-abcde".to_owned(),
                        source: api_error(code),
                    },
                    "MarkOutdated",
                ),
                (Error::ListNodeLeases(api_error(code)), "ListNodeLeases"),
                (
                    Error::WatchPoolNodes {
                        pool: "web".to_owned(),
                        source: api_error(code),
                    },
                    "WatchPoolNodes",
                ),
                (Error::WatchNodeLeases(api_error(code)), "WatchNodeLeases"),
            ];
            for (error, name) in table {
                assert_eq!(error.type_name(), name);
                assert_eq!(
                    error.source_error().map(retry_for),
                    Some(expected),
                    "{name}"
                );
                let _activity_error: ActivityError = error.into_activity_error();
            }
        }
    }

    #[test]
    fn node_metadata_variants_are_named_after_their_step_and_classified_by_the_answer() {
        for (code, expected) in [
            (403, Retry::NonRetryable),
            (409, Retry::Retryable),
            (503, Retry::Retryable),
        ] {
            let table = [
                (
                    Error::ApplyNode {
                        name: "web-abcde".to_owned(),
                        source: api_error(code),
                    },
                    "ApplyNode",
                ),
                (
                    Error::TaintNode {
                        name: "web-abcde".to_owned(),
                        source: api_error(code),
                    },
                    "TaintNode",
                ),
            ];
            for (error, name) in table {
                assert_eq!(error.type_name(), name);
                assert_eq!(
                    error.source_error().map(retry_for),
                    Some(expected),
                    "{name}"
                );
            }
        }
        let lost = Error::TaintNodeLost {
            name: "web-abcde".to_owned(),
        };
        assert_eq!(lost.type_name(), "TaintNodeLost");
        assert!(lost.source_error().is_none(), "not retryable");
        let _activity_error: ActivityError = lost.into_activity_error();
    }

    #[test]
    fn drain_variants_are_named_after_their_step_and_classified_by_the_answer() {
        for (code, expected) in [
            (403, Retry::NonRetryable),
            (409, Retry::Retryable),
            (429, Retry::Retryable),
            (503, Retry::Retryable),
        ] {
            for (error, name) in drain_variants(code) {
                assert_eq!(error.type_name(), name);
                assert_eq!(
                    error.source_error().map(retry_for),
                    Some(expected),
                    "{name}"
                );
                let _activity_error: ActivityError = error.into_activity_error();
            }
        }
    }
}
