#![doc = include_str!("../runbooks/create_machine.md")]

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use nodewright_activities::azure::machines::{
    ArmReadActivities, ArmWriteActivities, AwaitVm, BeginVmCreate, EnsureNic, TagMachine,
    TagOsDisk, VmCreateStarted, VmProvisioned,
};
use nodewright_activities::kube::{
    AwaitNode, DeleteBootstrapToken, KubeActivities, NodeMetadata, NodeTaint, NodeWait,
    TokenDeleted,
};
use nodewright_model::Operation;
use nodewright_model::bootstrap_token::{NAMESPACE as TOKEN_NAMESPACE, machine_secret_name};
use nodewright_model::cancel::Canceled;
use nodewright_model::drain::{
    ANNOTATION_DRAIN_POLICY, TAG_DRAIN, policy_to_annotation, policy_to_tag,
};
use nodewright_model::machine::{
    CreateMachineRequest, CreatedMachine, MachineStatus, Step, os_disk_name, zone_for,
};
use nodewright_model::names::arm_write_task_queue;
use nodewright_model::ownership::{Ownership, TAG_KEPT, kept_marker, kept_tags};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{WorkflowContext, WorkflowContextView, WorkflowResult};

use crate::progress::{
    HasStatus, StepFailed, activity_failure_text, begin, done, fact, fail, later, left_until, now,
    record_failure, rfc3339, succeed,
};
use crate::removal::{Removal, remove_machine};
use crate::search;
use crate::{activity_options, cancellation, input};

/// The patch marker of the join-token deletion (after Ready and after any undo): runs recorded
/// before it replay without the step. Only templates with `bootstrapToken` reach it.
const JOIN_TOKEN_PATCH: &str = "bootstrap-token-cleanup";

/// The patch marker of the VM's `nodewright.io-drain` tag (the pool's drain settings where a
/// Node cannot write them): runs recorded before it created their VM without the tag.
const DRAIN_TAG_PATCH: &str = "vm-drain-tag";

/// Creates one machine; see the runbook above.
#[workflow]
#[derive(Default)]
pub struct CreateMachineWorkflow {
    status: Option<MachineStatus>,
}

impl HasStatus for CreateMachineWorkflow {
    fn status_mut(&mut self) -> &mut MachineStatus {
        self.status
            .get_or_insert_with(|| MachineStatus::new("create", "", None, &Step::CREATE))
    }
}

#[workflow_methods]
impl CreateMachineWorkflow {
    /// Runs the runbook.
    #[run(name = "CreateMachine")]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request: CreateMachineRequest,
    ) -> WorkflowResult<CreatedMachine> {
        input::admit_machine_run(
            ctx,
            "CreateMachine",
            &input::Subject {
                cluster: &request.cluster,
                named: Some(("machine", &request.machine)),
            },
            request.check(),
        )?;
        let started = now(ctx);
        announce(ctx, &request, started);
        let deadline = later(started, request.creation_timeout);

        let scope = ctx
            .execute_activity(
                ArmReadActivities::scope,
                (),
                // Reads the worker's configuration: let it answer even after a request, so the
                // cancellation path runs with it.
                cancellation::shielded(activity_options::read()),
            )
            .await?;
        let vm_id = scope.vm_id(&request.machine);
        fact(ctx, "vmId", vm_id.clone());
        cancellation::before_first_step(ctx)?;

        match create(ctx, &request, started, deadline).await {
            Ok(created) => {
                let mut summary = format!("machine {} is Ready", request.machine);
                if let Some(JoinTokenCleanup::Failed(reason)) =
                    delete_join_token(ctx, &request).await
                {
                    summary.push_str("; ");
                    summary.push_str(&reason);
                }
                succeed(ctx, summary);
                Ok(created)
            }
            Err(failed) if cancellation::requested(ctx) => {
                record_failure(ctx, &StepFailed::new(failed.step, "canceled"));
                let mut canceled = Canceled::at(failed.step.as_str(), cancellation::reason(ctx));
                match compensate(ctx, &request, vm_id).await {
                    Ok(removed) => {
                        canceled.undone = removed.undone;
                        canceled.kept.extend(removed.kept);
                    }
                    Err(failure) => canceled.cleanup_failure = Some(failure),
                }
                Err(cancellation::end(ctx, canceled))
            }
            Err(failed) => {
                record_failure(ctx, &failed);
                let cleanup = if request.keep_on_failure {
                    let mut kept = keep(ctx, &request, &failed).await;
                    if let Some(cleanup) = delete_join_token(ctx, &request).await {
                        kept.push_str("; ");
                        kept.push_str(cleanup.text());
                    }
                    kept
                } else {
                    match compensate(ctx, &request, vm_id).await {
                        Ok(removed) => removed.summary(),
                        Err(failure) => failure,
                    }
                };
                let message = format!(
                    "creating machine {} failed at step {}: {}; {cleanup}",
                    request.machine, failed.step, failed.reason
                );
                Err(fail(ctx, "CreateFailed", message))
            }
        }
    }

    /// Every step with its state, the facts gathered, the outcome.
    #[query(name = "status")]
    pub fn status(&self, _ctx: &WorkflowContextView) -> MachineStatus {
        self.status
            .clone()
            .unwrap_or_else(|| MachineStatus::new("create", "", None, &Step::CREATE))
    }
}

/// Search attributes, the status skeleton and the first details line.
fn announce(
    ctx: &mut WorkflowContext<CreateMachineWorkflow>,
    request: &CreateMachineRequest,
    started: DateTime<Utc>,
) {
    ctx.upsert_search_attributes([
        search::CLUSTER.value_set(request.cluster.to_string()),
        search::POOL.value_set(request.pool.clone()),
        search::MACHINE.value_set(request.machine.clone()),
        search::OPERATION.value_set(Operation::Create.to_string()),
    ]);
    let mut status = MachineStatus::new(
        "create",
        &request.machine,
        Some(&request.pool),
        &Step::CREATE,
    );
    status.started_at = Some(rfc3339(started));
    ctx.state_mut(|s| s.status = Some(status));
}

/// The happy path, steps 3–8 of the runbook.
async fn create(
    ctx: &mut WorkflowContext<CreateMachineWorkflow>,
    request: &CreateMachineRequest,
    started: DateTime<Utc>,
    deadline: DateTime<Utc>,
) -> Result<CreatedMachine, StepFailed> {
    let writes = arm_write_task_queue(ctx.task_queue());
    let created_at = rfc3339(started);
    let deadline_text = rfc3339(deadline);
    let ownership = Ownership {
        cluster: &request.cluster,
        pool: &request.pool,
        machine: &request.machine,
        template: &request.template_hash,
        created: &created_at,
        creation_deadline: &deadline_text,
    };
    let tags = ownership.tags(&request.template.tags);
    let timeout_text = humanize(request.creation_timeout);

    cancellation::guard(ctx, Step::EnsureNic)?;
    begin(ctx, Step::EnsureNic);
    let nic = ctx
        .execute_activity(
            ArmWriteActivities::ensure_nic,
            EnsureNic {
                cluster: request.cluster.clone(),
                machine: request.machine.clone(),
                subnet_id: request.template.subnet_id.clone(),
                tags: tags.clone(),
            },
            cancellation::shielded(activity_options::arm_write(&writes)),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::EnsureNic, &e))?;
    fact(ctx, "nicId", nic.id.clone());
    done(
        ctx,
        Step::EnsureNic,
        if nic.created { "created" } else { "adopted" },
    );

    cancellation::guard(ctx, Step::CreateVm)?;
    begin(ctx, Step::CreateVm);
    let zone = zone_for(&request.machine, &request.template.zones);
    if let Some(zone) = &zone {
        fact(ctx, "zone", zone.clone());
    }
    let mut vm_tags = tags.clone();
    if ctx.patched(DRAIN_TAG_PATCH) {
        vm_tags.insert(TAG_DRAIN.to_owned(), policy_to_tag(&request.drain));
    }
    let vm = ctx
        .execute_activity(
            ArmWriteActivities::begin_vm_create,
            BeginVmCreate {
                cluster: request.cluster.clone(),
                machine: request.machine.clone(),
                template: request.template.clone(),
                nic_id: nic.id.clone(),
                zone,
                tags: vm_tags,
            },
            cancellation::shielded(activity_options::arm_write(&writes)),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::CreateVm, &e))?;
    let (operation, adopted) = match vm {
        VmCreateStarted::Started { operation } => (operation, false),
        VmCreateStarted::Adopted { .. } => (None, true),
    };
    done(
        ctx,
        Step::CreateVm,
        if adopted {
            "adopted the VM an earlier attempt started"
        } else {
            "PUT accepted"
        },
    );

    cancellation::guard(ctx, Step::ProvisionVm)?;
    begin(ctx, Step::ProvisionVm);
    let provisioned = ctx
        .execute_activity(
            ArmReadActivities::await_vm,
            AwaitVm {
                machine: request.machine.clone(),
                operation,
                deadline: deadline_text.clone(),
            },
            activity_options::wait(left_until(ctx, deadline)),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::ProvisionVm, &e))?;
    let (vm_id, os_disk) = match provisioned {
        VmProvisioned::Succeeded { vm_id, os_disk } => (vm_id, os_disk),
        VmProvisioned::TimedOut { provisioning_state } => {
            return Err(StepFailed::new(
                Step::ProvisionVm,
                format!(
                    "the VM did not finish provisioning within the creation timeout {timeout_text} (provisioningState {})",
                    provisioning_state.as_deref().unwrap_or("unknown")
                ),
            ));
        }
    };
    ctx.execute_activity(
        ArmWriteActivities::tag_os_disk,
        TagOsDisk {
            disk: os_disk.unwrap_or_else(|| os_disk_name(&request.machine)),
            tags: tags.clone(),
        },
        cancellation::shielded(activity_options::arm_write(&writes)),
    )
    .await
    .map_err(|e| StepFailed::from_activity(Step::ProvisionVm, &e))?;
    done(ctx, Step::ProvisionVm, "provisioningState Succeeded");

    cancellation::guard(ctx, Step::RegisterNode)?;
    begin(ctx, Step::RegisterNode);
    let await_node = AwaitNode {
        node: request.machine.clone(),
        vm_id: vm_id.clone(),
        deadline: deadline_text.clone(),
    };
    let registered = ctx
        .execute_activity(
            KubeActivities::await_node_registered,
            await_node.clone(),
            activity_options::wait(left_until(ctx, deadline)),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::RegisterNode, &e))?;
    let provider_id = match registered {
        NodeWait::Reached { provider_id } => provider_id,
        NodeWait::TimedOut { last_seen } => {
            return Err(StepFailed::new(
                Step::RegisterNode,
                format!(
                    "the Node did not register within the creation timeout {timeout_text} ({last_seen})"
                ),
            ));
        }
    };
    fact(ctx, "providerId", provider_id.clone());
    done(ctx, Step::RegisterNode, format!("Node {}", request.machine));

    cancellation::guard(ctx, Step::LabelNode)?;
    begin(ctx, Step::LabelNode);
    ctx.execute_activity(
        KubeActivities::apply_node_metadata,
        NodeMetadata {
            node: request.machine.clone(),
            labels: ownership.labels(&request.template.labels),
            taints: request
                .template
                .taints
                .iter()
                .map(|t| NodeTaint {
                    key: t.key.clone(),
                    value: t.value.clone(),
                    effect: t.effect.clone(),
                })
                .collect(),
            annotations: BTreeMap::from([(
                ANNOTATION_DRAIN_POLICY.to_owned(),
                policy_to_annotation(&request.drain),
            )]),
        },
        cancellation::shielded(activity_options::kube_write()),
    )
    .await
    .map_err(|e| StepFailed::from_activity(Step::LabelNode, &e))?;
    done(ctx, Step::LabelNode, "labels and taints applied");

    cancellation::guard(ctx, Step::WaitReady)?;
    begin(ctx, Step::WaitReady);
    let ready = ctx
        .execute_activity(
            KubeActivities::await_node_ready,
            await_node,
            activity_options::wait(left_until(ctx, deadline)),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::WaitReady, &e))?;
    if let NodeWait::TimedOut { last_seen } = ready {
        return Err(StepFailed::new(
            Step::WaitReady,
            format!(
                "the Node did not become Ready within the creation timeout {timeout_text} ({last_seen})"
            ),
        ));
    }
    done(ctx, Step::WaitReady, "Ready");

    Ok(CreatedMachine {
        machine: request.machine.clone(),
        pool: request.pool.clone(),
        vm_id,
        nic_id: nic.id,
        provider_id,
        node: request.machine.clone(),
        template_hash: request.template_hash.clone(),
        adopted,
    })
}

/// What compensation removed, and what it left because it is not this run's.
struct Compensated {
    undone: Vec<String>,
    kept: Vec<String>,
}

impl Compensated {
    fn summary(&self) -> String {
        let mut summary = if self.undone.is_empty() {
            "nothing to remove".to_owned()
        } else {
            format!("removed {}", self.undone.join(", "))
        };
        for kept in &self.kept {
            summary.push_str("; ");
            summary.push_str(kept);
        }
        summary
    }
}

/// Removes what the create made (shielded from cancellation, as all of `remove_machine`);
/// returns what was removed, or why it could not be.
async fn compensate(
    ctx: &mut WorkflowContext<CreateMachineWorkflow>,
    request: &CreateMachineRequest,
    vm_id: String,
) -> Result<Compensated, String> {
    // The token first: a VM still booting can no longer join with it.
    let token = delete_join_token(ctx, request).await;
    begin(ctx, Step::Compensate);
    let removal = Removal {
        cluster: request.cluster.clone(),
        machine: request.machine.clone(),
        vm_id,
    };
    match remove_machine(ctx, &removal, false).await {
        Ok(removed) => {
            let mut compensated = Compensated {
                undone: removed.what_went(),
                kept: removed.foreign_vm.iter().cloned().collect(),
            };
            match token {
                Some(JoinTokenCleanup::Deleted(_)) => compensated.undone.push(format!(
                    "the join token Secret {TOKEN_NAMESPACE}/{}",
                    machine_secret_name(&request.cluster, &request.machine)
                )),
                Some(JoinTokenCleanup::Failed(reason)) => compensated.kept.push(reason),
                Some(JoinTokenCleanup::Untouched(_)) | None => {}
            }
            done(ctx, Step::Compensate, compensated.summary());
            Ok(compensated)
        }
        Err(failed) => {
            let mut reason = format!(
                "compensation failed at {}: {}; the orphan sweep will remove what is left",
                failed.step, failed.reason
            );
            if let Some(JoinTokenCleanup::Failed(token)) = token {
                reason.push_str("; ");
                reason.push_str(&token);
            }
            record_failure(ctx, &StepFailed::new(Step::Compensate, reason.clone()));
            Err(reason)
        }
    }
}

/// What deleting the machine's join token came to.
enum JoinTokenCleanup {
    /// Deleted; the status detail.
    Deleted(String),
    /// There was none, or it is not this machine's; the status detail.
    Untouched(String),
    /// The deletion failed after its retries; why, and that the token expires at its TTL.
    Failed(String),
}

impl JoinTokenCleanup {
    fn text(&self) -> &str {
        match self {
            JoinTokenCleanup::Deleted(text)
            | JoinTokenCleanup::Untouched(text)
            | JoinTokenCleanup::Failed(text) => text,
        }
    }
}

/// Deletes the machine's minted join token (`kube.delete_bootstrap_token`, shielded from
/// cancellation) when its template has `bootstrapToken`: after the Node is Ready, and before any
/// undo. `None` when the template mints no token (or the run was recorded before this step).
async fn delete_join_token(
    ctx: &mut WorkflowContext<CreateMachineWorkflow>,
    request: &CreateMachineRequest,
) -> Option<JoinTokenCleanup> {
    if request.template.bootstrap_token.is_none() || !ctx.patched(JOIN_TOKEN_PATCH) {
        return None;
    }
    let secret = format!(
        "{TOKEN_NAMESPACE}/{}",
        machine_secret_name(&request.cluster, &request.machine)
    );
    begin(ctx, Step::DeleteJoinToken);
    let deleted = ctx
        .execute_activity(
            KubeActivities::delete_bootstrap_token,
            DeleteBootstrapToken {
                cluster: request.cluster.clone(),
                machine: request.machine.clone(),
            },
            cancellation::shielded(activity_options::kube_write()),
        )
        .await;
    Some(match deleted {
        Ok(deleted) => {
            let detail = deleted.summary(&secret);
            done(ctx, Step::DeleteJoinToken, detail.clone());
            if deleted == TokenDeleted::Deleted {
                JoinTokenCleanup::Deleted(detail)
            } else {
                JoinTokenCleanup::Untouched(detail)
            }
        }
        Err(error) => {
            let reason = format!(
                "deleting the join token Secret {secret} failed: {}; the token stops working at its expiration (bootstrapToken.ttl after it was minted)",
                activity_failure_text(&error)
            );
            record_failure(ctx, &StepFailed::new(Step::DeleteJoinToken, reason.clone()));
            JoinTokenCleanup::Failed(reason)
        }
    })
}

/// Marks what a failed create keeps (`keepOnFailure`) so that the orphan sweep leaves it: the
/// kept marker (`<time>: <reason>`) and the create's end merged into the tags of the machine's
/// VM, NIC and OS disk (shielded from cancellation, as compensation is). Returns what the
/// failure message says of it; a marking that fails is said there, the run fails either way.
async fn keep(
    ctx: &mut WorkflowContext<CreateMachineWorkflow>,
    request: &CreateMachineRequest,
    failed: &StepFailed,
) -> String {
    begin(ctx, Step::Keep);
    let writes = arm_write_task_queue(ctx.task_queue());
    let ended = rfc3339(now(ctx));
    let reason = format!("create failed at step {}: {}", failed.step, failed.reason);
    let input = TagMachine {
        cluster: request.cluster.clone(),
        machine: request.machine.clone(),
        tags: kept_tags(kept_marker(&ended, &reason), &ended),
    };
    let kept = "kept the VM, NIC, disk and Node for debugging (--keep-on-failure)";
    match ctx
        .execute_activity(
            ArmWriteActivities::tag_machine,
            input,
            cancellation::shielded(activity_options::arm_write(&writes)),
        )
        .await
    {
        Ok(tagged) => {
            let detail = tagged.summary();
            done(ctx, Step::Keep, detail.clone());
            format!(
                "{kept}: {detail} with the {TAG_KEPT} tag, which the orphan sweep respects until it is removed"
            )
        }
        Err(error) => {
            let reason = format!(
                "marking them with the {TAG_KEPT} tag failed: {}; the orphan sweep may remove them",
                activity_failure_text(&error)
            );
            record_failure(ctx, &StepFailed::new(Step::Keep, reason.clone()));
            format!("{kept}, but {reason}")
        }
    }
}

/// `20m`, `90s`, `1h 30m`: durations as people write them in pool files.
fn humanize(duration: std::time::Duration) -> String {
    humantime::format_duration(duration).to_string()
}
