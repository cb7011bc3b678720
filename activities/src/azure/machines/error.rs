//! Failures of the machine activities that are about the world, not about one ARM call.

use nodewright_model::arm::Disposition;
use temporalio_sdk::activities::ActivityError;

use crate::azure::Error as ArmError;
use crate::failure::{Failure, Retry};
use crate::kube::bootstrap::BootstrapError;
use crate::kube::join_token::JoinTokenError;

/// The failure type of [`MachineError::DeleteToResend`], which the removal workflow looks for.
pub const DELETE_TO_RESEND: &str = "DeleteToResend";

/// Why a machine activity failed.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    /// An ARM call failed; its error says which and how.
    #[error("{}", chain(.0.as_ref()))]
    Arm(Box<ArmError>),
    /// The VM's creation ended `Failed` in Azure.
    #[error("VM {machine} failed to provision: {code}: {message}")]
    ProvisioningFailed {
        /// The machine.
        machine: String,
        /// The ARM error code, e.g. `AllocationFailed`.
        code: String,
        /// ARM's message.
        message: String,
    },
    /// The VM's DELETE operation ended `Failed` with a code Azure means as "send it again"
    /// (`InternalExecutionError`, `OperationPreempted`, ...): the workflow re-sends the DELETE.
    #[error(
        "deleting VM {machine} failed in Azure with {code} ({message}); the delete is sent again"
    )]
    DeleteToResend {
        /// The machine.
        machine: String,
        /// The ARM error code.
        code: String,
        /// ARM's message.
        message: String,
    },
    /// A resource with the machine's name exists but is not nodewright's for this cluster.
    #[error(
        "{kind} {name} exists but {}: nodewright does not touch resources it did not create; pick another machine name or remove it yourself",
        nodewright_model::ownership::cluster_tag_mismatch(found.as_deref(), cluster)
    )]
    NotOwned {
        /// `VM`, `network interface`, `disk` or `Node`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The cluster this worker manages.
        cluster: String,
        /// The tag's value, if any.
        found: Option<String>,
    },
    /// A resource with the machine's name is this cluster's but another create made it (another
    /// run, or another template): refused, and nothing of it touched
    /// (`model::machine::adoption`).
    #[error("{0}")]
    NameTaken(String),
    /// The bootstrap Secret or Key Vault secret the template names cannot be used (its message
    /// never carries the content).
    #[error("{0}")]
    Bootstrap(#[from] BootstrapError),
    /// The machine's join token could not be minted or filled in (its message never carries the
    /// token).
    #[error("{0}")]
    JoinToken(#[from] JoinTokenError),
    /// The VM an action (restart, redeploy) is for does not exist: the pool controller sees it
    /// missing at its next look and replaces it.
    #[error("VM {machine} is gone: there is nothing to {action}")]
    VmGone {
        /// The machine.
        machine: String,
        /// The action, e.g. `restart`.
        action: String,
    },
    /// A response that cannot be: ARM answered without a field it always sends.
    #[error("{0}")]
    Unexpected(String),
}

impl From<ArmError> for MachineError {
    fn from(error: ArmError) -> Self {
        MachineError::Arm(Box::new(error))
    }
}

/// `error: cause: cause`, so that the message Temporal records is complete on one line.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

impl MachineError {
    /// Classifies the failure for Temporal: ARM errors as the client classifies them, the rest
    /// as not retryable (a retry meets the same world).
    pub fn into_activity_error(self) -> ActivityError {
        let (type_name, retry, retry_after) = match &self {
            MachineError::Arm(error) => (
                error.type_name(),
                match error.disposition() {
                    Disposition::Retryable => Retry::Retryable,
                    Disposition::Terminal | Disposition::Gone => Retry::NonRetryable,
                },
                error.retry_after(),
            ),
            MachineError::ProvisioningFailed { .. } => {
                ("ProvisioningFailed", Retry::NonRetryable, None)
            }
            MachineError::NotOwned { .. } => ("NotOwned", Retry::NonRetryable, None),
            MachineError::NameTaken(_) => ("NameTaken", Retry::NonRetryable, None),
            MachineError::VmGone { .. } => ("VmGone", Retry::NonRetryable, None),
            // Not retried as an activity (it would poll the same finished operation): the
            // workflow sends the DELETE again.
            MachineError::DeleteToResend { .. } => (DELETE_TO_RESEND, Retry::NonRetryable, None),
            MachineError::Bootstrap(error) => (
                error.type_name(),
                if error.is_retryable() {
                    Retry::Retryable
                } else {
                    Retry::NonRetryable
                },
                error.retry_after(),
            ),
            MachineError::JoinToken(error) => (
                error.type_name(),
                if error.is_retryable() {
                    Retry::Retryable
                } else {
                    Retry::NonRetryable
                },
                None,
            ),
            MachineError::Unexpected(_) => ("Unexpected", Retry::Retryable, None),
        };
        Failure {
            error: self,
            type_name,
            retry,
            retry_after,
        }
        .into()
    }
}
