//! What the worker runs, in one place: the main task queue (every workflow, the Kubernetes
//! activities, ARM reads and waits, Temporal reads) and the ARM-write task queue (PUT, PATCH, DELETE), whose
//! server-enforced rate limit keeps every worker of the deployment together under the
//! subscription's ARM write budget (architecture §5). Both refuse the activities of another
//! cluster's runs ([`crate::isolation`]), and every workflow refuses an input for another cluster
//! than the configured one ([`nodewright_workflows::input`]).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use nodewright_activities::azure::headroom::HeadroomActivities;
use nodewright_activities::azure::images::ImageActivities;
use nodewright_activities::azure::machines::{ArmReadActivities, ArmWriteActivities};
use nodewright_activities::azure::{ArmClient, KeyVaultClient};
use nodewright_activities::kube::JoinTokens;
use nodewright_activities::kube::KubeActivities;
use nodewright_activities::kube::bootstrap::BootstrapSource;
use nodewright_activities::report::ReportActivities;
use nodewright_activities::temporal::TemporalActivities;
use nodewright_model::config::ClusterConfig;
use nodewright_model::names::arm_write_task_queue;
use nodewright_workflows::registry::register_every_workflow;
use temporalio_sdk::WorkerOptions;

use crate::deadline::DeadlineGuard;
use crate::isolation::ClusterGuard;

/// The outside clients the activities use, built once at start-up.
pub struct Clients {
    /// The cluster's apiserver.
    pub kube: kube::Client,
    /// Whether the apiserver's cluster identity has been verified since the start.
    pub identity_established: Arc<AtomicBool>,
    /// Azure Resource Manager, for the configured subscription and resource group.
    pub arm: ArmClient,
    /// Azure Key Vault, for bootstraps kept there.
    pub key_vault: KeyVaultClient,
    /// Temporal itself (visibility and results, for the orphan sweep).
    pub temporal: temporalio_client::Client,
}

/// The options of the two workers this process runs.
pub struct WorkerSet {
    /// Polls `temporal.task_queue`: workflows, Kubernetes activities, ARM reads and waits.
    pub main: WorkerOptions,
    /// Polls `<task_queue>-arm-writes`: ARM writes, rate-limited by the server.
    pub arm_writes: WorkerOptions,
}

/// Both workers' options: every workflow and activity, the shutdown grace period, and the ARM
/// write rate limit.
pub fn worker_options(config: &ClusterConfig, clients: Clients) -> anyhow::Result<WorkerSet> {
    let Clients {
        kube,
        identity_established,
        arm,
        key_vault,
        temporal,
    } = clients;
    // Before any workflow is registered: every run checks its input's cluster against it.
    nodewright_workflows::input::serve_cluster(&config.cluster).map_err(|served| {
        anyhow::anyhow!(
            "this process already serves cluster {served}, not {}: run one worker process per cluster",
            config.cluster
        )
    })?;
    let task_queue = config.temporal.task_queue.clone();
    let bootstrap = BootstrapSource::kubernetes(kube.clone()).with_key_vault(key_vault);
    let join_tokens = JoinTokens::kubernetes(kube.clone());
    let node_events = kube.clone();
    let main = register_every_workflow(WorkerOptions::new(task_queue.clone()))
        .context("registering the workflows")?
        .register_activities(KubeActivities::with_identity(
            kube,
            crate::identity::expected(config),
            identity_established,
        ))
        .register_activities(ArmReadActivities::new(arm.clone()))
        .register_activities(HeadroomActivities::new(
            arm.clone(),
            config.azure.location.clone(),
        ))
        .register_activities(ImageActivities::new(
            arm.clone(),
            config.azure.location.clone(),
        ))
        .register_activities(TemporalActivities::new(temporal))
        .register_activities(ReportActivities)
        .worker_interceptor(crate::run_meter::RunMeter::with_node_events(
            node_events.clone(),
        ))
        .activity_inbound_interceptor(ClusterGuard::new(config.cluster.clone()))
        .activity_inbound_interceptor(DeadlineGuard)
        .graceful_shutdown_period(config.worker.shutdown_grace)
        .build();
    let arm_writes = WorkerOptions::new(arm_write_task_queue(&task_queue))
        .register_activities(
            ArmWriteActivities::new(arm, config.azure.location.clone())
                .with_bootstrap(bootstrap)
                .with_join_tokens(join_tokens)
                .with_node_events(node_events),
        )
        .max_task_queue_activities_per_second(config.azure.arm_writes_per_second)
        .activity_inbound_interceptor(ClusterGuard::new(config.cluster.clone()))
        .activity_inbound_interceptor(DeadlineGuard)
        .graceful_shutdown_period(config.worker.shutdown_grace)
        .build();
    Ok(WorkerSet { main, arm_writes })
}
