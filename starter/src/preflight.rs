//! `nodewright preflight [--pool FILE]...`: checks the pool files given, runs PreflightWorkflow
//! and prints the report, with each pool's headroom (the subnet's free addresses, the vCPU
//! quotas, the size's restrictions, and how many of its machines fit now).

use std::time::Duration;

use nodewright_model::headroom::HeadroomQuestion;
use nodewright_model::pool::ValidPool;
use nodewright_model::preflight::{PoolHeadroom, PreflightPool};
use nodewright_model::rollout::Budget;
use nodewright_model::text::quoted;
use nodewright_model::{Operation, WorkflowId};
use nodewright_workflows::{PreflightInput, PreflightWorkflow, search};
use temporalio_client::{WorkflowGetResultOptions, WorkflowIdConflictPolicy, WorkflowStartOptions};
use temporalio_common::search_attributes::SearchAttributes;

use crate::handles::no_result;
use crate::{CliError, Output, settings::Settings};

/// Arguments of `nodewright preflight`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long to wait for a worker to finish the check, in seconds (1 to 600).
    #[arg(long, default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=nodewright_model::limits::MAX_CLI_WAIT_SECONDS))]
    timeout: u64,
    /// A Pool file to check before the run (repeat for several): every problem with its field
    /// and fix, and a warning when its inline bootstrap looks like it holds a credential.
    #[arg(long = "pool", value_name = "FILE")]
    pools: Vec<std::path::PathBuf>,
}

/// Starts the check, waits for its report and prints it.
pub async fn run(settings: &Settings, output: Output, args: Args) -> Result<(), CliError> {
    // The pool files first: an invalid one stops here, before anything starts.
    let pools = args
        .pools
        .iter()
        .map(|path| crate::pool_file::load(path))
        .collect::<Result<Vec<_>, _>>()?;
    let cluster = settings.cluster()?;
    let client = settings.temporal().connect().await?;
    let workflow_id = WorkflowId::for_cluster(Operation::Preflight, &cluster);
    let link = settings.ui_link(&workflow_id);
    let options = WorkflowStartOptions::new(settings.task_queue.clone(), workflow_id.to_string())
        // A check already under way answers the same question: follow it instead of refusing.
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .execution_timeout(Duration::from_secs(600))
        .search_attributes(SearchAttributes::new([
            search::CLUSTER.value_set(cluster.to_string()),
            search::OPERATION.value_set(Operation::Preflight.to_string()),
        ]))
        .static_summary(format!("Preflight check of cluster {cluster}"))
        .build();
    let handle = client
        .start_workflow(
            PreflightWorkflow::run,
            PreflightInput {
                cluster: cluster.clone(),
                pools: pools.iter().map(placement).collect(),
            },
            options,
        )
        .await
        .map_err(|error| CliError::RunFailed(format!("starting {workflow_id} failed: {error}")))?;
    if output == Output::Text {
        eprintln!(
            "started {workflow_id} (or joined the one already running); waiting for a worker on task queue {}",
            quoted(&settings.task_queue)
        );
    }

    let wait = handle.get_result(WorkflowGetResultOptions::default());
    let report = tokio::time::timeout(Duration::from_secs(args.timeout), wait)
        .await
        .map_err(|_| {
            CliError::RunFailed(format!(
                "{workflow_id} did not finish within {}s: is nodewright-worker running on task queue {}? See {link}",
                args.timeout,
                quoted(&settings.task_queue)
            ))
        })?
        .map_err(|error| {
            CliError::RunFailed(format!("{workflow_id} {}; see {link}", no_result(&error)))
        })?;

    match output {
        Output::Json => {
            let pools: Vec<_> = pools
                .iter()
                .map(|pool| serde_json::json!({ "pool": pool.name, "templateHash": pool.template_hash }))
                .collect();
            let document = serde_json::json!({ "workflowId": workflow_id.as_str(), "report": report, "ui": link, "pools": pools });
            println!("{document}");
        }
        Output::Text => {
            let kubernetes = &report.kubernetes;
            println!("preflight of cluster {} passed", report.cluster);
            println!(
                "  kubernetes   {}, nodes: {} ({} Ready)",
                kubernetes.server_version, kubernetes.nodes, kubernetes.ready_nodes
            );
            println!("  temporal UI  {link}");
            for pool in &pools {
                println!(
                    "  pool         {} valid, template {}",
                    pool.name, pool.template_hash
                );
            }
            for headroom in &report.headroom {
                for line in headroom_lines(headroom) {
                    println!("{line}");
                }
            }
        }
    }
    Ok(())
}

/// Where `pool`'s machines go, for the run's input (nothing else of the template).
fn placement(pool: &ValidPool) -> PreflightPool {
    let strategy = &pool.strategy;
    let budget = Budget::resolve(strategy.max_surge, strategy.max_unavailable, pool.replicas);
    PreflightPool {
        pool: pool.name.clone(),
        replicas: pool.replicas,
        surge: budget.surge,
        question: HeadroomQuestion {
            subnet_id: pool.template.subnet_id.clone(),
            vm_size: pool.template.vm_size.clone(),
            zones: pool.template.zones.clone(),
        },
        buffer: pool.headroom,
    }
}

/// A pool's headroom in lines for people.
fn headroom_lines(headroom: &PoolHeadroom) -> Vec<String> {
    let mut lines = vec![format!("  headroom     pool {}", headroom.pool)];
    let Some(reading) = &headroom.reading else {
        let why = headroom.error.as_deref().unwrap_or("not read");
        lines.push(format!("    could not be read: {why}"));
        return lines;
    };
    match &reading.subnet {
        Some(subnet) => lines.push(format!(
            "    subnet {}: {} free of {} usable addresses",
            subnet.name,
            subnet.free(),
            subnet.usable
        )),
        None => lines.push(
            "    subnet: its virtual network's usages do not list it (not checked)".to_owned(),
        ),
    }
    for quota in &reading.quotas {
        lines.push(format!(
            "    quota {}: {} free of {}",
            quota.name,
            quota.free(),
            quota.limit
        ));
    }
    lines.push(format!(
        "    size: {} vCPUs per machine in {}",
        reading.vcpus, reading.location
    ));
    if let Some(fit) = &headroom.fit {
        for skipped in &fit.skipped {
            lines.push(format!(
                "    zone {} skipped: the size is restricted there ({})",
                skipped.zone, skipped.reason
            ));
        }
        let verdict = match &fit.limit {
            None => format!(
                "    fits: all {} machines at once (replicas and surge)",
                headroom.wanted
            ),
            Some(limit) => format!(
                "    fits: {} of {} machines at once (replicas and surge); {}",
                fit.machines,
                headroom.wanted,
                limit.message()
            ),
        };
        lines.push(verdict);
    }
    lines
}

#[cfg(test)]
mod tests {
    use nodewright_model::headroom::{Buffer, HeadroomReading, QuotaRoom, SubnetRoom};

    use super::*;

    #[test]
    fn a_pools_headroom_reads_as_its_limits_and_what_fits() {
        let pool = PreflightPool {
            pool: "workers".to_owned(),
            replicas: 4,
            surge: 1,
            question: HeadroomQuestion {
                subnet_id: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/small".to_owned(),
                vm_size: "Standard_D2s_v5".to_owned(),
                zones: Vec::new(),
            },
            buffer: Buffer::default(),
        };
        let reading = HeadroomReading {
            location: "westeurope".to_owned(),
            subnet: Some(SubnetRoom {
                name: "small".to_owned(),
                usable: 3,
                used: 0,
            }),
            quotas: vec![QuotaRoom {
                name: "regional vCPUs".to_owned(),
                limit: 100,
                used: 10,
            }],
            vcpus: 2,
            restrictions: Vec::new(),
        };
        let lines = headroom_lines(&PoolHeadroom::of(&pool, Ok(reading)));
        assert_eq!(
            lines,
            [
                "  headroom     pool workers",
                "    subnet small: 3 free of 3 usable addresses",
                "    quota regional vCPUs: 90 free of 100",
                "    size: 2 vCPUs per machine in westeurope",
                "    fits: 3 of 5 machines at once (replicas and surge); subnet small: 3 free addresses, 5 needed",
            ]
        );
        let unread = headroom_lines(&PoolHeadroom::of(
            &pool,
            Err("403 AuthorizationFailed".to_owned()),
        ));
        assert_eq!(unread[1], "    could not be read: 403 AuthorizationFailed");
    }
}
