//! The restart and redeploy rungs of a pool controller's remediation ladder: `POST …/restart`
//! (the guest reboots on its host) and `POST …/redeploy` (the VM moves to another host and boots
//! there), each begun and waited for in one activity on the ARM-write queue.
//!
//! Before the POST the VM is read: a VM gone is [`MachineError::VmGone`] and one without this
//! cluster's and the machine's tags [`MachineError::NotOwned`], both not retryable, and nothing
//! is sent. ARM's refusals keep ARM's classification (`model::arm`): a 409 because another
//! operation holds the VM is retried; a 409 `OperationNotAllowed` (a restart of a VM that is not
//! running) is not, with Azure's message. An operation that ends `Failed` is an error with ARM's
//! code.
//!
//! The operation's handle is the activity's heartbeat detail: an attempt that follows one that
//! timed out or lost its worker polls that operation again instead of restarting (or
//! redeploying) the VM a second time, and starts a new one only when that operation failed.

use std::future::Future;
use std::time::Duration;

use nodewright_model::ClusterName;
use nodewright_model::arm::poll_schedule::OperationKind;
use serde::{Deserialize, Serialize};
use temporalio_sdk::activities::ActivityContext;

use super::error::MachineError;
use super::{check_owned, is_gone};
use crate::azure::{ArmClient, Error as ArmError, OperationHandle};
use crate::lifetime::HEARTBEAT_EVERY;

/// How long one attempt waits for the action's operation: inside the ARM-write options' three
/// minutes an attempt; a longer redeploy is waited for by the next attempt, from the handle.
pub const ACTION_WAIT: Duration = Duration::from_secs(150);

/// Restart or redeploy a machine's VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmAction {
    /// The owning cluster: a VM without its tag (and the machine's) is not touched.
    pub cluster: ClusterName,
    /// The machine (= VM name).
    pub machine: String,
}

/// A VM action whose operation ended `Succeeded`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmActionDone {
    /// The machine (= VM name).
    pub machine: String,
    /// The action: `restart` or `redeploy`.
    pub action: String,
}

/// Which VM action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerAction {
    /// `POST …/restart`.
    Restart,
    /// `POST …/redeploy`.
    Redeploy,
}

impl PowerAction {
    /// The action's name in ARM's URL and in [`VmActionDone::action`].
    pub fn name(self) -> &'static str {
        match self {
            PowerAction::Restart => "restart",
            PowerAction::Redeploy => "redeploy",
        }
    }
}

/// Reads the machine's VM, refuses it when gone or not this cluster's machine's, and sends the
/// action; returns the operation to wait for (none when ARM finished at once).
pub async fn begin(
    client: &ArmClient,
    action: PowerAction,
    input: &VmAction,
) -> Result<Option<OperationHandle>, MachineError> {
    let gone = || MachineError::VmGone {
        machine: input.machine.clone(),
        action: action.name().to_owned(),
    };
    let vm = match client.get_vm(&input.machine).await {
        Ok(vm) => vm,
        Err(error) if is_gone(&error) => return Err(gone()),
        Err(error) => return Err(error.into()),
    };
    check_owned(
        "VM",
        &input.machine,
        &vm.tags,
        &input.cluster,
        &input.machine,
    )?;
    match client.vm_action(&input.machine, action.name()).await {
        Ok(handle) => Ok(handle),
        // Deleted between the read and the POST.
        Err(error) if is_gone(&error) => Err(gone()),
        Err(error) => Err(error.into()),
    }
}

/// Waits for the action's operation (if any) to end, for at most `max_wait`: `Succeeded` is
/// [`VmActionDone`], `Failed` an error with ARM's code, no end in time a retryable
/// `WaitTimedOut`.
pub async fn finish(
    client: &ArmClient,
    action: PowerAction,
    input: &VmAction,
    operation: Option<&OperationHandle>,
    max_wait: Duration,
) -> Result<VmActionDone, MachineError> {
    if let Some(handle) = operation {
        client
            .wait(handle, OperationKind::VmAction, max_wait)
            .await?;
    }
    Ok(VmActionDone {
        machine: input.machine.clone(),
        action: action.name().to_owned(),
    })
}

/// The activity: [`attempt`] with the operation an earlier attempt recorded as its heartbeat
/// detail, heartbeating through the activity's context.
pub(super) async fn run(
    client: &ArmClient,
    ctx: &ActivityContext,
    action: PowerAction,
    input: &VmAction,
) -> Result<VmActionDone, MachineError> {
    let resumed = ctx
        .heartbeat_details()
        .deserialize::<OperationHandle>()
        .ok()
        .flatten();
    let beat = |handle: Option<OperationHandle>| {
        let ctx = ctx.clone();
        async move {
            let recorded = match handle {
                Some(handle) => ctx.record_heartbeat(handle).await,
                None => ctx.record_heartbeat(()).await,
            };
            if let Err(error) = recorded {
                tracing::debug!(
                    error = %nodewright_model::text::error_chain(&error),
                    "recording a heartbeat failed"
                );
            }
        }
    };
    attempt(client, action, input, resumed, beat).await
}

/// One attempt: waits for the operation `resumed` (an earlier attempt's) when there is one;
/// begins the action when there is none or that operation failed (the attempt before reported
/// the failure and was retried), and waits for it. `beat` records a heartbeat, with the handle
/// of the operation waited for (at once and every [`HEARTBEAT_EVERY`]), so that the next
/// attempt finds it.
pub async fn attempt<B, F>(
    client: &ArmClient,
    action: PowerAction,
    input: &VmAction,
    resumed: Option<OperationHandle>,
    beat: B,
) -> Result<VmActionDone, MachineError>
where
    B: Fn(Option<OperationHandle>) -> F,
    F: Future<Output = ()>,
{
    if let Some(handle) = resumed {
        let waited = beating(
            &beat,
            Some(&handle),
            finish(client, action, input, Some(&handle), ACTION_WAIT),
        )
        .await;
        match waited {
            Err(MachineError::Arm(error)) if matches!(*error, ArmError::OperationFailed { .. }) => {
                tracing::info!(
                    machine = %input.machine,
                    action = action.name(),
                    "the earlier attempt's operation failed; sending the action again"
                );
            }
            outcome => return outcome,
        }
    }
    let operation = beating(&beat, None, begin(client, action, input)).await?;
    beating(
        &beat,
        operation.as_ref(),
        finish(client, action, input, operation.as_ref(), ACTION_WAIT),
    )
    .await
}

/// Runs `work`, beating every [`HEARTBEAT_EVERY`] (and at once when there is a `handle`) with
/// `handle` as the detail.
async fn beating<T, B, F>(
    beat: &B,
    handle: Option<&OperationHandle>,
    work: impl Future<Output = T>,
) -> T
where
    B: Fn(Option<OperationHandle>) -> F,
    F: Future<Output = ()>,
{
    if handle.is_some() {
        beat(handle.cloned()).await;
    }
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return out,
            () = tokio::time::sleep(HEARTBEAT_EVERY) => beat(handle.cloned()).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn inputs_and_results_are_camel_case_json() {
        let input: VmAction = serde_json::from_value(json!({
            "cluster": "prod",
            "machine": "web-abcde",
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(input.machine, "web-abcde");
        assert_eq!(input.cluster.to_string(), "prod");
        let done = VmActionDone {
            machine: "web-abcde".to_owned(),
            action: PowerAction::Redeploy.name().to_owned(),
        };
        assert_eq!(
            serde_json::to_value(&done).unwrap_or_else(|e| panic!("{e}")),
            json!({ "machine": "web-abcde", "action": "redeploy" })
        );
        assert_eq!(PowerAction::Restart.name(), "restart");
    }

    #[test]
    fn a_gone_vm_fails_without_retries_naming_the_vm() {
        let error = MachineError::VmGone {
            machine: "web-abcde".to_owned(),
            action: "restart".to_owned(),
        };
        assert_eq!(
            error.to_string(),
            "VM web-abcde is gone: there is nothing to restart"
        );
    }
}
