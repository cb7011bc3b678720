//! nodewright's own PreflightWorkflow, on an in-test worker with the real Kubernetes activities.

use anyhow::Result;
use nodewright_activities::kube::KubeActivities;
use nodewright_model::ClusterName;
use nodewright_tests::{Stack, kube_objects, stack::ensure_eq, temporal_worker};
use nodewright_workflows::{PreflightInput, PreflightWorkflow};
use temporalio_client::{WorkflowGetResultOptions, WorkflowQueryOptions, WorkflowStartOptions};
use temporalio_sdk::WorkerOptions;

#[tokio::test]
async fn preflight_reports_the_real_apiserver_version() -> Result<()> {
    let stack = Stack::load()?;
    let client = stack.temporal_client().await?;
    let kube_client = stack.kube_client().await?;
    let task_queue = temporal_worker::unique_task_queue("preflight");
    let cluster = ClusterName::parse("cluster", &format!("pf-{}", kube_objects::unique_suffix()))?;
    let workflow_id = format!("preflight/{cluster}");

    let options = WorkerOptions::new(task_queue.clone())
        .register_workflow::<PreflightWorkflow>()?
        .register_activities(KubeActivities::new(kube_client))
        .build();
    let (report, status) = temporal_worker::with_worker(client.clone(), options, async {
        let handle = client
            .start_workflow(
                PreflightWorkflow::run,
                PreflightInput {
                    cluster: cluster.clone(),
                    pools: Vec::new(),
                },
                WorkflowStartOptions::new(task_queue.clone(), workflow_id.clone()).build(),
            )
            .await?;
        let report = handle
            .get_result(WorkflowGetResultOptions::default())
            .await?;
        let status = handle
            .query(
                PreflightWorkflow::status,
                (),
                WorkflowQueryOptions::default(),
            )
            .await?;
        Ok((report, status))
    })
    .await?;

    ensure_eq(
        "reported apiserver version",
        report.kubernetes.server_version.as_str(),
        stack.kubernetes_version.as_str(),
    )?;
    ensure_eq(
        "reported cluster",
        report.cluster.as_str(),
        cluster.as_str(),
    )?;
    assert!(
        report.kubernetes.ready_nodes <= report.kubernetes.nodes,
        "{report:?}"
    );
    ensure_eq(
        "status phase after completion",
        status.phase.as_str(),
        "done",
    )?;
    ensure_eq("status report", status.report.as_ref(), Some(&report))?;

    let query = format!(
        "NodewrightOperation = 'preflight' AND NodewrightCluster = '{cluster}' AND NodewrightPhase = 'done'"
    );
    temporal_worker::wait_for_listed_run(&client, &query, |run| run.id() == workflow_id).await?;
    Ok(())
}
