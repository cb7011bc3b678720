//! The happy path, steps 3–8 of the runbook: the NIC, the VM (created or adopted), its
//! provisioning and OS disk tags, the Node's registration, labels and taints, and Ready; each
//! step guarded against a cancellation and bounded by the creation deadline.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use nodewright_activities::azure::machines::{
    ArmReadActivities, ArmWriteActivities, AwaitVm, BeginVmCreate, EnsureNic, TagOsDisk,
    VmCreateStarted, VmProvisioned,
};
use nodewright_activities::kube::{AwaitNode, KubeActivities, NodeMetadata, NodeTaint, NodeWait};
use nodewright_model::drain::{
    ANNOTATION_DRAIN_POLICY, TAG_DRAIN, policy_to_annotation, policy_to_tag,
};
use nodewright_model::machine::create::past_creation_timeout;
use nodewright_model::machine::{CreateMachineRequest, CreatedMachine, Step, os_disk_name};
use nodewright_model::names::arm_write_task_queue;
use nodewright_model::ownership::Ownership;

use super::state::Ctx;
use crate::progress::{StepFailed, begin, done, fact, left_until, rfc3339};
use crate::{activity_options, cancellation};

/// The patch marker of the VM's `nodewright.io-drain` tag (the pool's drain settings where a
/// Node cannot write them): runs recorded before it created their VM without the tag.
const DRAIN_TAG_PATCH: &str = "vm-drain-tag";

/// The happy path, steps 3–8 of the runbook.
pub(super) async fn create(
    ctx: &mut Ctx,
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
    let timeout = request.creation_timeout;

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
    let zone = request.chosen_zone();
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
                deadline,
            },
            activity_options::wait(left_until(ctx, deadline)),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::ProvisionVm, &e))?;
    let (vm_id, os_disk) = match provisioned {
        VmProvisioned::Succeeded { vm_id, os_disk } => (vm_id, os_disk),
        VmProvisioned::TimedOut { provisioning_state } => {
            let state = provisioning_state.as_deref().unwrap_or("unknown");
            return Err(StepFailed::new(
                Step::ProvisionVm,
                past_creation_timeout(
                    "the VM did not finish provisioning",
                    timeout,
                    &format!("provisioningState {state}"),
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
        deadline,
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
                past_creation_timeout("the Node did not register", timeout, &last_seen),
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
            past_creation_timeout("the Node did not become Ready", timeout, &last_seen),
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
