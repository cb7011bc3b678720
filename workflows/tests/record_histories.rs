//! The exporter behind `dev/record-histories`, not a check: it fetches the runs that script picked
//! from the local stack and writes each history in the JSON form `WorkflowHistory::from_json`
//! reads back in the replay test (`tests/replay.rs`). The SDK reads only its own JSON form (serde
//! field names, numeric enums), not the proto JSON of `temporal workflow show --output json`.
//!
//! Ignored unless run through the script, which passes the runs in `NODEWRIGHT_RECORD_RUNS`, one
//! `FILE WORKFLOW_ID RUN_ID [MARKER]` per line, and the stack's `TEMPORAL_ADDRESS` and
//! `TEMPORAL_NAMESPACE`. With a `MARKER` (a patch id the script picked the run for, through the
//! `TemporalChangeVersion` search attribute), the history must record that patch marker, or
//! nothing is written for that line and the test fails naming it.

// The test harness reads histories from files and settings from the environment; workflows/
// clippy.toml bans that in workflow code, not here.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::env;
use std::fs;

use nodewright_connect::TemporalSettings;
use temporalio_client::{WorkflowExecutionInfo, WorkflowFetchHistoryOptions};
use temporalio_common::protos::constants::PATCH_MARKER_NAME;
use temporalio_common::protos::coresdk::common::decode_change_marker_details;
use temporalio_common::protos::temporal::api::history::v1::History;
use temporalio_common::protos::temporal::api::history::v1::history_event::Attributes;

/// Whether `history` records the patch marker `id`.
fn records_marker(history: &History, id: &str) -> bool {
    history
        .events
        .iter()
        .any(|event| match event.attributes.as_ref() {
            Some(Attributes::MarkerRecordedEventAttributes(marker))
                if marker.marker_name == PATCH_MARKER_NAME =>
            {
                decode_change_marker_details(&marker.details).is_some_and(|(found, _)| found == id)
            }
            _ => false,
        })
}

#[tokio::test]
#[ignore = "needs the local stack; run through dev/record-histories"]
async fn record_histories() {
    let runs = env::var("NODEWRIGHT_RECORD_RUNS")
        .expect("NODEWRIGHT_RECORD_RUNS is not set: run dev/record-histories instead");
    let address = env::var("TEMPORAL_ADDRESS").expect("TEMPORAL_ADDRESS");
    let namespace = env::var("TEMPORAL_NAMESPACE").unwrap_or_else(|_| "default".to_owned());
    let client = TemporalSettings::plaintext(address, namespace.clone(), "record-histories")
        .connect()
        .await
        .expect("connecting to Temporal");
    let mut unmarked = Vec::new();
    for line in runs.lines().filter(|l| !l.trim().is_empty()) {
        let (file, workflow_id, run_id, marker) =
            match line.split_whitespace().collect::<Vec<_>>()[..] {
                [file, workflow_id, run_id] => (file, workflow_id, run_id, None),
                [file, workflow_id, run_id, marker] => (file, workflow_id, run_id, Some(marker)),
                _ => panic!("expected `FILE WORKFLOW_ID RUN_ID [MARKER]`, got {line:?}"),
            };
        let json = WorkflowExecutionInfo::builder()
            .namespace(namespace.clone())
            .workflow_id(workflow_id.to_owned())
            .run_id(run_id.to_owned())
            .build()
            .bind_untyped(client.clone())
            .fetch_history(WorkflowFetchHistoryOptions::default())
            .to_json()
            .await
            .unwrap_or_else(|e| panic!("fetching the history of {workflow_id} {run_id}: {e}"));
        // Pretty-printed, so a refreshed history reviews as a readable diff.
        if let Some(marker) = marker {
            let history: History = serde_json::from_slice(&json).expect("history JSON");
            if !records_marker(&history, marker) {
                unmarked.push(format!(
                    "{workflow_id} {run_id} (for {file}): no marker {marker}"
                ));
                continue;
            }
        }
        let value: serde_json::Value = serde_json::from_slice(&json).expect("history JSON");
        let pretty = serde_json::to_vec_pretty(&value).expect("history JSON");
        fs::write(file, pretty).unwrap_or_else(|e| panic!("writing {file}: {e}"));
        println!("recorded {workflow_id} {run_id} into {file}");
    }
    assert!(
        unmarked.is_empty(),
        "not recorded, the history lacks the patch marker it was picked for:\n  {}",
        unmarked.join("\n  ")
    );
}
