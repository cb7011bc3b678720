//! What the CLI prints with `--output json`, as the model's types: a drain's status
//! (`machine status` of a drain), a rollout's (`pool rollout status`), a sweep's (`sweep
//! status`), and what a `--wait` prints at the end (`{"workflowId","result","ui"}`). Parsed with
//! [`crate::machines::CliResult::parse`], a field a type requires that is missing, renamed or of
//! another type fails the test instead of reading as `""` or 0. Lookups by key ([`DrainLookup`],
//! [`StepLookup`]) and [`shown`] (a value as JSON, for failure messages) go with them.

use std::fmt;

use nodewright_model::drain::{DrainStatus, PodProgress, VolumeProgress};
use nodewright_model::machine::{MachineStatus, Step, StepProgress};
use nodewright_model::preflight::PreflightReport;
use nodewright_model::rollout::{PoolReport, RolloutStatus};
use nodewright_model::sweep::{SweepAudit, SweepStatus};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

use crate::machines::MachineStatusDocument;

/// A value as one line of JSON, for failure messages (never Rust debug formatting).
pub fn shown<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|error| format!("(not shown: {error})"))
}

/// `machine status <machine> --output json` of a machine whose latest run is its drain.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainStatusDocument {
    /// `drain/<cluster>/<machine>`.
    pub workflow_id: String,
    /// `running`, `completed`, `failed`, `canceled`, ...
    pub run_status: String,
    /// DrainNode's `status` query.
    pub status: DrainStatus,
    /// The run in Temporal's UI.
    pub ui: String,
}

impl DrainStatusDocument {
    /// Whether the run is still going.
    pub fn is_running(&self) -> bool {
        self.run_status == "running"
    }
}

/// `machine status <machine> --output json` typed by the run it shows: a drain's document when
/// the machine's latest run is a drain (`workflowId` `drain/...`), a create's or a delete's
/// otherwise (with the delete's drain, if it drained).
#[derive(Debug, Clone)]
pub enum MachineRunDocument {
    /// The latest run is a drain.
    Drain(Box<DrainStatusDocument>),
    /// The latest run is a create or a delete.
    Machine(Box<MachineStatusDocument>),
}

impl MachineRunDocument {
    /// The run's workflow ID.
    pub fn workflow_id(&self) -> &str {
        match self {
            Self::Drain(document) => &document.workflow_id,
            Self::Machine(document) => &document.workflow_id,
        }
    }

    /// `running`, `completed`, `failed`, `canceled`, ...
    pub fn run_status(&self) -> &str {
        match self {
            Self::Drain(document) => &document.run_status,
            Self::Machine(document) => &document.run_status,
        }
    }

    /// The run's own steps and outcome: a drain's `run`, a create's or a delete's `status`.
    pub fn run(&self) -> &MachineStatus {
        match self {
            Self::Drain(document) => &document.status.run,
            Self::Machine(document) => &document.status,
        }
    }

    /// The step the run is at (the one `running`), by its name, if any.
    pub fn running_step(&self) -> Option<&'static str> {
        self.run().current().map(Step::as_str)
    }

    /// The drain's status: the run's own for a drain, a delete's drain's, if it drained.
    pub fn drain(&self) -> Option<&DrainStatus> {
        match self {
            Self::Drain(document) => Some(&document.status),
            Self::Machine(document) => document.drain.as_ref(),
        }
    }
}

impl<'de> Deserialize<'de> for MachineRunDocument {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        let id = value
            .get("workflowId")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| D::Error::missing_field("workflowId"))?;
        if id.starts_with("drain/") {
            serde_json::from_value(value)
                .map(|document| Self::Drain(Box::new(document)))
                .map_err(D::Error::custom)
        } else {
            serde_json::from_value(value)
                .map(|document| Self::Machine(Box::new(document)))
                .map_err(D::Error::custom)
        }
    }
}

impl fmt::Display for MachineRunDocument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Drain(document) => f.write_str(&shown(document)),
            Self::Machine(document) => f.write_str(&shown(document)),
        }
    }
}

/// `pool rollout status <pool> --output json`: RollingUpdate's `status` query with the run's
/// identity beside its fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatusDocument {
    /// `rollout/<cluster>/<pool>`.
    pub workflow_id: String,
    /// `running`, `completed`, `failed`, ...
    pub run_status: String,
    /// The run in Temporal's UI.
    pub ui: String,
    /// The `status` query.
    #[serde(flatten)]
    pub status: RolloutStatus,
}

/// `pool status <pool> --output json`: InspectPool's report of the pool's machines, and the
/// rollout under way, if any.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatusDocument {
    /// What InspectPool found.
    pub report: PoolReport,
    /// The running rollout's status (`null` when none runs).
    pub rollout: Option<RolloutStatus>,
}

/// `sweep status --output json` while a sweep runs: OrphanSweep's `status` query with the run's
/// identity beside its fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepStatusDocument {
    /// `sweep/<cluster>` or a scheduled run's ID.
    pub workflow_id: String,
    /// The run.
    pub run_id: String,
    /// `running`, ...
    pub run_status: String,
    /// The run in Temporal's UI.
    pub ui: String,
    /// The `status` query.
    #[serde(flatten)]
    pub status: SweepStatus,
}

/// What `sweep run --wait --output json` prints when the sweep ended: its audit, shown as JSON
/// in failure messages, read as the [`SweepAudit`] it holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SweepAuditDocument(pub SweepAudit);

impl std::ops::Deref for SweepAuditDocument {
    type Target = SweepAudit;

    fn deref(&self) -> &SweepAudit {
        &self.0
    }
}

/// `preflight --output json`: the worker's report, the run's identity, and the pools the
/// configuration names.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreflightDocument {
    /// `preflight/<cluster>`.
    pub workflow_id: String,
    /// What the worker found.
    pub report: PreflightReport,
    /// The run in Temporal's UI.
    pub ui: String,
    /// The configured pools, each with its template hash.
    pub pools: Vec<PoolTemplate>,
}

/// A configured pool and its template hash, as `preflight` lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolTemplate {
    /// The pool's name.
    pub pool: String,
    /// Its template's hash.
    pub template_hash: String,
}

/// One run of `runs --output json` (a list of them): the CLI's own row, no model type.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRow {
    /// The run's workflow ID.
    pub workflow_id: String,
    /// The workflow type (`CreateMachine`, ...).
    #[serde(rename = "type")]
    pub workflow_type: String,
    /// `running`, `completed`, `failed`, ...
    pub status: String,
    /// The `NodewrightPool` search attribute, when set.
    pub pool: Option<String>,
    /// The `NodewrightMachine` search attribute, when set.
    pub machine: Option<String>,
    /// The `NodewrightPhase` search attribute, when set.
    pub phase: Option<String>,
    /// When it started, RFC 3339 (empty when unknown).
    pub started: String,
    /// When it closed, RFC 3339 (empty while it runs).
    pub closed: String,
}

/// What a command with `--wait --output json` prints when its run ended: the run's result
/// (e.g. [`nodewright_model::drain::DrainedNode`], [`nodewright_model::rollout::RolloutResult`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultDocument<T> {
    /// The run's workflow ID.
    pub workflow_id: String,
    /// What the workflow returned.
    pub result: T,
    /// The run in Temporal's UI.
    pub ui: String,
}

macro_rules! shown_as_json {
    ($($document:ty),*) => {$(
        impl fmt::Display for $document {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&shown(self))
            }
        }
    )*};
}
shown_as_json!(
    SweepAuditDocument,
    PreflightDocument,
    DrainStatusDocument,
    PoolStatusDocument,
    RolloutStatusDocument,
    SweepStatusDocument
);

impl<T: Serialize> fmt::Display for ResultDocument<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&shown(self))
    }
}

/// A step of a run by its name.
pub trait StepLookup {
    /// The entry of `step`, if the run lists it.
    fn step(&self, step: Step) -> Option<&StepProgress>;
}

impl StepLookup for MachineStatus {
    fn step(&self, step: Step) -> Option<&StepProgress> {
        self.steps.iter().find(|entry| entry.step == step)
    }
}

/// A drain's pods, volumes and steps by their keys.
pub trait DrainLookup {
    /// The entry of `pod` (`namespace/name`).
    fn pod(&self, pod: &str) -> Option<&PodProgress>;
    /// The entry of the PersistentVolume `pv`.
    fn volume(&self, pv: &str) -> Option<&VolumeProgress>;
    /// The entry of `step` in the drain's run.
    fn step(&self, step: Step) -> Option<&StepProgress>;
}

impl DrainLookup for DrainStatus {
    fn pod(&self, pod: &str) -> Option<&PodProgress> {
        self.pods.iter().find(|entry| entry.pod == pod)
    }

    fn volume(&self, pv: &str) -> Option<&VolumeProgress> {
        self.volumes
            .iter()
            .find(|entry| entry.persistent_volume == pv)
    }

    fn step(&self, step: Step) -> Option<&StepProgress> {
        StepLookup::step(&self.run, step)
    }
}

/// Prints a run's steps with their details, one line each.
pub fn print_steps(run: &MachineStatus) {
    for step in &run.steps {
        println!(
            "  step {:<13} {:<8} {}",
            step.step.as_str(),
            shown(&step.state).trim_matches('"'),
            step.detail.as_deref().unwrap_or("")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_model::drain::{DrainMode, DrainedNode, PodState};
    use nodewright_model::machine::StepState;
    use nodewright_model::sweep::SweepPhase;

    const RUN: &str = r#"{"operation":"drain","machine":"web-abcde","steps":[
        {"step":"cordon","state":"done"},{"step":"evict-pods","state":"running","detail":"1 left"}],
        "outcome":"running"}"#;

    fn drain_document(status: &str) -> String {
        format!(
            r#"{{"workflowId":"drain/c/web-abcde","runStatus":"running","status":{status},"ui":"http://ui"}}"#
        )
    }

    #[test]
    fn a_drain_document_reads_its_pods_volumes_and_steps() {
        let status = format!(
            r#"{{"run":{RUN},"mode":{{"mode":"force","reason":"the deadline passed"}},
            "pods":[{{"pod":"a/web-1","state":"force-deleted","evictions":3}}],
            "volumes":[{{"persistentVolume":"pv-0","pod":"a/db-0","state":"detach-timed-out"}}],
            "pdbsBlocking":[],"warnings":["pv-0 stuck"],"localDataLost":[]}}"#
        );
        let document: DrainStatusDocument =
            serde_json::from_str(&drain_document(&status)).expect("a drain document");
        assert!(document.is_running());
        assert_eq!(
            document.status.mode,
            DrainMode::Force {
                reason: "the deadline passed".into()
            }
        );
        let pod = document.status.pod("a/web-1").expect("the pod");
        assert_eq!((pod.state, pod.evictions), (PodState::ForceDeleted, 3));
        assert!(document.status.pod("a/web-2").is_none());
        assert_eq!(
            document.status.volume("pv-0").map(|v| v.pod.as_str()),
            Some("a/db-0")
        );
        let evict = DrainLookup::step(&document.status, Step::EvictPods).expect("the step");
        assert_eq!(evict.state, StepState::Running);
        assert!(
            document
                .to_string()
                .contains(r#""workflowId":"drain/c/web-abcde""#)
        );
    }

    #[test]
    fn a_drain_document_without_the_fields_its_types_require_does_not_parse() {
        let no_mode = format!(r#"{{"run":{RUN},"pods":[]}}"#);
        let unknown_state = format!(
            r#"{{"run":{RUN},"mode":{{"mode":"graceful"}},"pods":[{{"pod":"a/p","state":"moved"}}]}}"#
        );
        let renamed_pod = format!(
            r#"{{"run":{RUN},"mode":{{"mode":"graceful"}},"pods":[{{"name":"a/p","state":"gone"}}]}}"#
        );
        for status in [no_mode, unknown_state, renamed_pod, "{}".to_owned()] {
            let text = drain_document(&status);
            assert!(
                serde_json::from_str::<DrainStatusDocument>(&text).is_err(),
                "{text} parsed"
            );
        }
        let no_run_status = r#"{"workflowId":"drain/c/m","status":{},"ui":""}"#;
        assert!(serde_json::from_str::<DrainStatusDocument>(no_run_status).is_err());
    }

    #[test]
    fn machine_status_reads_as_the_drain_or_the_machine_run_it_shows() {
        let status = format!(r#"{{"run":{RUN},"mode":{{"mode":"graceful"}}}}"#);
        let drain: MachineRunDocument =
            serde_json::from_str(&drain_document(&status)).expect("a drain's machine status");
        assert!(matches!(drain, MachineRunDocument::Drain(_)));
        assert_eq!(
            drain.drain().map(|d| d.run.machine.as_str()),
            Some("web-abcde")
        );
        let delete = format!(
            r#"{{"workflowId":"delete/c/web-abcde","runStatus":"completed","status":{RUN},
            "drain":{status},"ui":"u"}}"#
        );
        let delete: MachineRunDocument = serde_json::from_str(&delete).expect("a delete");
        assert_eq!(
            (delete.workflow_id(), delete.run_status()),
            ("delete/c/web-abcde", "completed")
        );
        assert!(delete.drain().is_some());
        assert_eq!(delete.running_step(), Some("evict-pods"));
        assert_eq!(drain.run().operation, "drain");
        // A drain document whose status is a machine run's (no mode) does not pass as one.
        let wrong = drain_document(RUN);
        assert!(serde_json::from_str::<MachineRunDocument>(&wrong).is_err());
        assert!(serde_json::from_str::<MachineRunDocument>(r#"{"runStatus":"running"}"#).is_err());
    }

    #[test]
    fn a_runs_row_needs_its_identity_and_status() {
        let text = r#"[{"workflowId":"sweep/c","type":"OrphanSweep","status":"running",
            "pool":null,"machine":null,"phase":"acting","started":"2026-11-27T02:00:00Z","closed":""}]"#;
        let rows: Vec<RunRow> = serde_json::from_str(text).expect("runs");
        assert_eq!(rows[0].workflow_type, "OrphanSweep");
        assert_eq!(rows[0].phase.as_deref(), Some("acting"));
        let renamed = text.replace("\"status\"", "\"state\"");
        assert!(serde_json::from_str::<Vec<RunRow>>(&renamed).is_err());
    }

    #[test]
    fn a_sweep_document_reads_the_status_beside_the_run_and_needs_its_counts() {
        let text = r#"{"workflowId":"sweep/c","runId":"r1","runStatus":"running","ui":"u",
            "phase":"awaiting-approval","summary":"3 to delete","seen":9,"planned":3,"done":0,
            "failed":0,"plan":{"delete vm":3}}"#;
        let document: SweepStatusDocument = serde_json::from_str(text).expect("a sweep document");
        assert_eq!(document.status.phase, SweepPhase::AwaitingApproval);
        assert_eq!(document.status.plan.get("delete vm"), Some(&3));
        let without_planned = text.replace(r#""planned":3,"#, "");
        assert!(serde_json::from_str::<SweepStatusDocument>(&without_planned).is_err());
        let without_run = text.replace(r#""runId":"r1","#, "");
        assert!(serde_json::from_str::<SweepStatusDocument>(&without_run).is_err());
    }

    #[test]
    fn a_rollout_document_reads_the_status_beside_the_run_and_needs_its_phase() {
        use nodewright_model::rollout::{RolloutPhase, StrategyView, fallback_strategy};
        let strategy = StrategyView::of(&fallback_strategy(), 3);
        let status = RolloutStatus::new("web", "abc123", 3, strategy, 3, 1_700_000_000);
        let mut json = serde_json::to_value(&status).expect("a status as JSON");
        let fields = json.as_object_mut().expect("an object");
        for (key, value) in [
            ("workflowId", "rollout/c/web"),
            ("runStatus", "running"),
            ("ui", "u"),
        ] {
            fields.insert(key.to_owned(), value.into());
        }
        let document: RolloutStatusDocument =
            serde_json::from_value(json.clone()).expect("a rollout document");
        assert_eq!(document.status, status);
        assert_eq!(document.status.phase, RolloutPhase::Progressing);
        for key in ["phase", "counts", "runStatus"] {
            let mut without = json.clone();
            without.as_object_mut().map(|fields| fields.remove(key));
            assert!(
                serde_json::from_value::<RolloutStatusDocument>(without).is_err(),
                "parsed without {key}"
            );
        }
    }

    #[test]
    fn a_result_document_needs_the_fields_of_its_result() {
        let text = r#"{"workflowId":"drain/c/m","ui":"u","result":{"node":"m","nodeFound":true,
            "evicted":["a/p"],"forceDeleted":[],"volumesMoved":[["pv-0","n2"]]}}"#;
        let document: ResultDocument<DrainedNode> =
            serde_json::from_str(text).expect("a drain result");
        assert_eq!(document.result.evicted, vec!["a/p"]);
        assert_eq!(
            document.result.volumes_moved,
            vec![("pv-0".to_owned(), "n2".to_owned())]
        );
        let without = text.replace(r#""forceDeleted":[],"#, "");
        assert!(serde_json::from_str::<ResultDocument<DrainedNode>>(&without).is_err());
    }
}
