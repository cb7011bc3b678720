//! How long creates, deletes and drains take, measured by the worker rather than by workflow
//! code: a worker interceptor sees each run's start (its `InitializeWorkflow`, with the start
//! time and `NodewrightPool`) and the command that ends it (complete, fail, cancel), and records
//! `nodewright_machine_create_duration_seconds`, `…_delete_…` and `nodewright_drain_duration_seconds`
//! by pool and result. A DeleteMachine run an orphan sweep started that succeeds counts as the
//! sweep's VM deletion, and one replacing an unhealthy machine (its input's disruption, read from
//! the decoded activation) as the remediation `replace`.
//!
//! A run replayed on another worker (after a restart) is measured from its real start. Only the
//! worker that sends the ending records it; replays send none.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use nodewright_activities::kube::node_story::{NodeStory, Occurrence};
use nodewright_activities::metrics::{self, RunResult, TimedRun};
use nodewright_model::SearchAttribute;
use nodewright_model::disruption::Disruption;
use nodewright_model::machine::DeleteMachineRequest;
use nodewright_model::names::Operation;
use nodewright_model::workflow_type;
use temporalio_common::protos::coresdk::workflow_activation::WorkflowActivation;
use temporalio_common::protos::coresdk::workflow_activation::workflow_activation_job::Variant as Job;
use temporalio_common::protos::coresdk::workflow_commands::workflow_command::Variant as Command;
use temporalio_common::protos::coresdk::workflow_completion::WorkflowActivationCompletion;
use temporalio_common::protos::coresdk::workflow_completion::workflow_activation_completion::Status;
use temporalio_common::protos::temporal::api::common::v1::SearchAttributes;
use temporalio_sdk::interceptors::WorkerInterceptor;

/// What the meter keeps about a running run it measures.
#[derive(Debug, Clone, PartialEq)]
struct Run {
    kind: TimedRun,
    started: SystemTime,
    pool: String,
    /// A DeleteMachine run an orphan sweep started.
    by_sweep: bool,
    /// A DeleteMachine run replacing an unhealthy machine (the remediation ladder's `replace`).
    replaces_unhealthy: bool,
}

/// How many measured runs are remembered, so that none is measured twice.
const REMEMBERED: usize = 4096;

/// The interceptor; runs of other types are not kept.
#[derive(Default)]
pub struct RunMeter {
    /// Where the `replace` rung is told as an Event about the machine's Node, when set.
    node_events: Option<(kube::Client, Arc<NodeStory>)>,
    /// The replacements told lately, so that a replayed start is not told again.
    told: Mutex<(HashSet<String>, VecDeque<String>)>,
    runs: Mutex<HashMap<String, Run>>,
    /// The runs measured lately, oldest first: a run whose ending is sent again (its task
    /// failed, or it was evicted and replayed before the server closed it) is measured once.
    measured: Mutex<(HashSet<String>, VecDeque<String>)>,
}

impl RunMeter {
    /// A meter that also tells each replacement of an unhealthy machine (the remediation
    /// ladder's `replace` rung) as a `Remediated` Event about its Node, in the cluster behind
    /// `client`, when its DeleteMachine run starts.
    pub fn with_node_events(client: kube::Client) -> Self {
        Self {
            node_events: Some((client, Arc::new(NodeStory::default()))),
            ..Self::default()
        }
    }

    /// Tells, once per run, that `machine` is replaced as a remediation.
    fn tell_replacement(&self, run_id: &str, machine: &str) {
        let Some((client, story)) = &self.node_events else {
            return;
        };
        if !first_in(&self.told, run_id) {
            return;
        }
        let (client, story, machine) = (client.clone(), story.clone(), machine.to_owned());
        tokio::spawn(async move {
            let occurrence = Occurrence {
                node: &machine,
                reason: "Remediated",
                action: "Remediate",
                subject: "replace",
                note: "remediation rung replace: the machine is drained and deleted, and its pool's controller makes a new one".to_owned(),
                warning: true,
            };
            story.tell(&client, occurrence).await;
        });
    }

    fn started(&self, run_id: &str, run: Run) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.insert(run_id.to_owned(), run);
        }
    }

    fn forget(&self, run_id: &str) -> Option<Run> {
        self.runs.lock().ok()?.remove(run_id)
    }

    /// Whether `run_id` is measured now for the first time (remembering it).
    fn first_measure(&self, run_id: &str) -> bool {
        first_in(&self.measured, run_id)
    }

    fn set_pool(&self, run_id: &str, pool: String) {
        if let Ok(mut runs) = self.runs.lock()
            && let Some(run) = runs.get_mut(run_id)
        {
            run.pool = pool;
        }
    }
}

/// Whether `run_id` is new to `remembered` (remembering it, the oldest of more than
/// [`REMEMBERED`] forgotten).
fn first_in(remembered: &Mutex<(HashSet<String>, VecDeque<String>)>, run_id: &str) -> bool {
    let Ok(mut remembered) = remembered.lock() else {
        return false;
    };
    let (seen, order) = &mut *remembered;
    if !seen.insert(run_id.to_owned()) {
        return false;
    }
    order.push_back(run_id.to_owned());
    if order.len() > REMEMBERED
        && let Some(oldest) = order.pop_front()
    {
        seen.remove(&oldest);
    }
    true
}

fn timed(workflow: &str) -> Option<TimedRun> {
    match workflow {
        workflow_type::CREATE_MACHINE => Some(TimedRun::Create),
        workflow_type::DELETE_MACHINE => Some(TimedRun::Delete),
        workflow_type::DRAIN_NODE => Some(TimedRun::Drain),
        _ => None,
    }
}

/// `NodewrightPool`'s value in `attributes`, when set (a JSON string).
fn pool_of(attributes: Option<&SearchAttributes>) -> Option<String> {
    let payload = attributes?
        .indexed_fields
        .get(SearchAttribute::Pool.name())?;
    serde_json::from_slice::<String>(&payload.data).ok()
}

/// How a completion ends its run, if it does.
fn ending(completion: &WorkflowActivationCompletion) -> (Option<RunResult>, Option<String>) {
    let Some(Status::Successful(success)) = &completion.status else {
        return (None, None);
    };
    let mut result = None;
    let mut pool = None;
    for command in success.commands.iter().filter_map(|c| c.variant.as_ref()) {
        match command {
            Command::CompleteWorkflowExecution(_) => result = Some(RunResult::Succeeded),
            Command::FailWorkflowExecution(_) => result = Some(RunResult::Failed),
            Command::CancelWorkflowExecution(_) => result = Some(RunResult::Canceled),
            Command::UpsertWorkflowSearchAttributes(upsert) => {
                if let Some(value) = pool_of(upsert.search_attributes.as_ref()) {
                    pool = Some(value);
                }
            }
            _ => {}
        }
    }
    (result, pool)
}

#[async_trait::async_trait(?Send)]
impl WorkerInterceptor for RunMeter {
    async fn on_workflow_activation(
        &self,
        activation: &WorkflowActivation,
    ) -> Result<(), anyhow::Error> {
        for job in activation
            .jobs
            .iter()
            .filter_map(|job| job.variant.as_ref())
        {
            match job {
                Job::InitializeWorkflow(init) => {
                    let Some(kind) = timed(&init.workflow_type) else {
                        continue;
                    };
                    let started = init
                        .start_time
                        .and_then(|time| {
                            let seconds = u64::try_from(time.seconds).ok()?;
                            let nanos = u64::try_from(time.nanos).ok()?;
                            SystemTime::UNIX_EPOCH.checked_add(
                                Duration::from_secs(seconds) + Duration::from_nanos(nanos),
                            )
                        })
                        .unwrap_or_else(SystemTime::now);
                    let by_sweep = init.parent_workflow_info.as_ref().is_some_and(|parent| {
                        parent
                            .workflow_id
                            .starts_with(&format!("{}/", Operation::Sweep))
                    });
                    let pool = pool_of(init.search_attributes.as_ref()).unwrap_or_default();
                    let replaced = (kind == TimedRun::Delete)
                        .then(|| init.arguments.first())
                        .flatten()
                        .and_then(|input| {
                            serde_json::from_slice::<DeleteMachineRequest>(&input.data).ok()
                        })
                        .filter(|request| request.disruption == Disruption::HealthRemediation);
                    let replaces_unhealthy = replaced.is_some();
                    if let Some(request) = &replaced {
                        self.tell_replacement(&activation.run_id, &request.machine);
                    }
                    self.started(
                        &activation.run_id,
                        Run {
                            kind,
                            started,
                            pool,
                            by_sweep,
                            replaces_unhealthy,
                        },
                    );
                }
                Job::RemoveFromCache(_) => {
                    // Evicted: a later activation replays it from its InitializeWorkflow.
                    self.forget(&activation.run_id);
                }
                _ => {}
            }
        }
        Ok(())
    }

    async fn on_workflow_activation_completion(&self, completion: &WorkflowActivationCompletion) {
        let (result, pool) = ending(completion);
        if let Some(pool) = pool {
            self.set_pool(&completion.run_id, pool);
        }
        let Some(result) = result else {
            return;
        };
        let Some(run) = self.forget(&completion.run_id) else {
            return;
        };
        if !self.first_measure(&completion.run_id) {
            return;
        }
        let seconds = SystemTime::now()
            .duration_since(run.started)
            .unwrap_or_default()
            .as_secs_f64();
        metrics::run_ended(run.kind, &run.pool, result, seconds);
        if run.kind == TimedRun::Delete && result == RunResult::Succeeded {
            if run.by_sweep {
                metrics::sweep_deletion("vm");
            }
            if run.replaces_unhealthy {
                metrics::remediation(&run.pool, "replace");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use temporalio_common::protos::coresdk::workflow_commands::{
        CompleteWorkflowExecution, UpsertWorkflowSearchAttributes, WorkflowCommand,
    };
    use temporalio_common::protos::coresdk::workflow_completion::Success;
    use temporalio_common::protos::temporal::api::common::v1::Payload;

    fn pool_attribute(pool: &str) -> SearchAttributes {
        SearchAttributes {
            indexed_fields: [(
                SearchAttribute::Pool.name().to_owned(),
                Payload {
                    data: serde_json::to_vec(pool).expect("json"),
                    ..Payload::default()
                },
            )]
            .into_iter()
            .collect(),
        }
    }

    #[test]
    fn a_completion_with_an_upsert_and_a_complete_ends_the_run_in_its_pool() {
        let completion = WorkflowActivationCompletion {
            run_id: "r".into(),
            status: Some(Status::Successful(Success {
                commands: vec![
                    WorkflowCommand {
                        variant: Some(Command::UpsertWorkflowSearchAttributes(
                            UpsertWorkflowSearchAttributes {
                                search_attributes: Some(pool_attribute("blue")),
                            },
                        )),
                        ..WorkflowCommand::default()
                    },
                    WorkflowCommand {
                        variant: Some(Command::CompleteWorkflowExecution(
                            CompleteWorkflowExecution::default(),
                        )),
                        ..WorkflowCommand::default()
                    },
                ],
                ..Success::default()
            })),
            ..WorkflowActivationCompletion::default()
        };
        assert_eq!(
            ending(&completion),
            (Some(RunResult::Succeeded), Some("blue".to_owned()))
        );
        assert_eq!(
            ending(&WorkflowActivationCompletion::default()),
            (None, None)
        );
    }

    #[test]
    fn a_run_is_measured_once() {
        let meter = RunMeter::default();
        assert!(meter.first_measure("a"));
        assert!(!meter.first_measure("a"));
        assert!(meter.first_measure("b"));
    }

    #[test]
    fn only_creates_deletes_and_drains_are_timed() {
        assert_eq!(timed(workflow_type::CREATE_MACHINE), Some(TimedRun::Create));
        assert_eq!(timed(workflow_type::DELETE_MACHINE), Some(TimedRun::Delete));
        assert_eq!(timed(workflow_type::DRAIN_NODE), Some(TimedRun::Drain));
        assert_eq!(timed(workflow_type::ROLLING_UPDATE), None);
    }
}
