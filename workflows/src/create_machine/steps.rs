//! The happy path, steps 3–8 of the runbook: the NIC, the VM (created or adopted, its
//! provisioning and OS disk tags: [`super::vm`]), the Node's registration, labels and taints,
//! and Ready; each step guarded against a cancellation and bounded by the creation deadline.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use nodewright_activities::azure::machines::{ArmWriteActivities, EnsureNic};
use nodewright_activities::kube::{AwaitNode, KubeActivities, NodeMetadata, NodeTaint, NodeWait};
use nodewright_model::arm::WriteStage;
use nodewright_model::drain::{
    ANNOTATION_DRAIN_POLICY, ANNOTATION_DRAIN_POLICY_STAMP, policy_to_annotation,
};
use nodewright_model::machine::adoption::create_run;
use nodewright_model::machine::create::past_creation_timeout;
use nodewright_model::machine::{CreateMachineRequest, CreatedMachine, Step};
use nodewright_model::names::arm_write_task_queue;
use nodewright_model::ownership::{Ownership, TAG_CREATE_RUN};
use nodewright_model::pool::CapacityType;
use nodewright_model::pool::capacity_type::TAG_CAPACITY_TYPE;
use nodewright_model::pool::machine_capacity::{capacity_labels, machine_taints};

use super::state::Ctx;
use super::vm::{ProvisionedVm, create_vm};
use crate::progress::{StepFailed, begin, done, fact, left_until, rfc3339};
use crate::{activity_options, cancellation};

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
    let image_version = request
        .template
        .image
        .to_ref()
        .and_then(|image| image.version())
        .map(|version| version.to_string());
    let ownership = Ownership {
        cluster: &request.cluster,
        pool: &request.pool,
        machine: &request.machine,
        template: &request.template_hash,
        created: &created_at,
        creation_deadline: &deadline_text,
        image_version: image_version.as_deref(),
    };
    let capacity = request.chosen_capacity_type();
    let mut tags = ownership.tags(&request.template.tags);
    tags.insert(TAG_CAPACITY_TYPE.to_owned(), capacity.as_str().to_owned());
    // Which run made the VM and NIC: a retry adopts them, another create refuses them.
    let run = create_run(ctx.workflow_id(), ctx.info().first_execution_run_id());
    tags.insert(TAG_CREATE_RUN.to_owned(), run);
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
            cancellation::shielded(activity_options::arm_write(&writes, WriteStage::Starting)),
        )
        .await
        .map_err(|e| StepFailed::from_activity(Step::EnsureNic, &e))?;
    fact(ctx, "nicId", nic.id.clone());
    done(
        ctx,
        Step::EnsureNic,
        if nic.created { "created" } else { "adopted" },
    );

    let ProvisionedVm { vm_id, adopted } =
        create_vm(ctx, request, &nic.id, &tags, deadline).await?;

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
    let annotations = drain_annotations(ctx, request);
    ctx.execute_activity(
        KubeActivities::apply_node_metadata,
        NodeMetadata {
            node: request.machine.clone(),
            labels: labels_of(&ownership, request, capacity),
            taints: machine_taints(&request.template, capacity)
                .iter()
                .map(|t| NodeTaint {
                    key: t.key.clone(),
                    value: t.value.clone(),
                    effect: t.effect.clone(),
                })
                .collect(),
            annotations,
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
        warnings: ctx.state(|s| {
            s.status
                .as_ref()
                .map(|status| status.warnings.clone())
                .unwrap_or_default()
        }),
    })
}

/// The patch that writes, beside the pool's drain settings, the stamp that records them
/// (`nodewright.io/drain-policy-stamp`), so that a drain tells an operator's later edit from
/// what the create wrote. Runs recorded before it wrote the settings alone.
const PATCH_STAMPS_DRAIN_POLICY: &str = "create-stamps-drain-policy";

/// The Node's drain annotations: the pool's drain settings, and their stamp.
fn drain_annotations(ctx: &mut Ctx, request: &CreateMachineRequest) -> BTreeMap<String, String> {
    let settings = policy_to_annotation(&request.drain);
    let mut annotations = BTreeMap::from([(ANNOTATION_DRAIN_POLICY.to_owned(), settings.clone())]);
    if ctx.patched(PATCH_STAMPS_DRAIN_POLICY) {
        annotations.insert(ANNOTATION_DRAIN_POLICY_STAMP.to_owned(), settings);
    }
    annotations
}

/// The Node's labels: the template's, the machine's capacity type (and AKS's Spot label when
/// asked), then nodewright's ownership labels, which nothing overrides.
fn labels_of(
    ownership: &Ownership<'_>,
    request: &CreateMachineRequest,
    capacity: CapacityType,
) -> BTreeMap<String, String> {
    let mut labels = request.template.labels.clone();
    labels.extend(capacity_labels(&request.template, capacity));
    ownership.labels(&labels)
}
