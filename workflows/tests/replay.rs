//! Replays every recorded history in `tests/histories/` against today's workflow code, with the
//! same workflows the worker registers (`nodewright_workflows::registry`). A change that alters the
//! commands a workflow issues for an existing history (a reordered, added or removed activity,
//! timer or child workflow) fails here, before it ships to workers that still have such runs in
//! flight. Needs no stack: activities are not executed, their results come from the history.
//!
//! `dev/record-histories` refreshes the histories from the local stack after an intended change;
//! see "Upgrading workers safely" in the README.
//!
//! `tests/histories/encrypted/` holds histories recorded with payload encryption on, under the
//! test key `tests/histories/encrypted/test.keys` (a key for these tests only, never used
//! anywhere real): they replay with the codec's data converter given that key, and without it
//! the replay fails naming the key, instead of passing on ciphertext.

// The test harness reads histories from files and settings from the environment; workflows/
// clippy.toml bans that in workflow code, not here.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nodewright_connect::TemporalSettings;
use nodewright_connect::codec::{ENCODING_ENCRYPTED, KeyRing};
use nodewright_workflows::registry::{register_every_workflow, registered_types};
use temporalio_client::WorkflowHistory;
use temporalio_common::data_converters::DataConverter;
use temporalio_common::protos::temporal::api::history::v1::History;
use temporalio_common::protos::temporal::api::history::v1::history_event::Attributes;
use temporalio_sdk::workflow_replayer::{WorkflowReplayer, WorkflowReplayerOptions};

/// A replayer with every workflow the worker registers, converting payloads as a worker without
/// encryption keys does.
fn replayer() -> WorkflowReplayer {
    replayer_with(TemporalSettings::plaintext("", "", "replay").data_converter())
}

/// A replayer with every workflow the worker registers and `data_converter`.
fn replayer_with(data_converter: DataConverter) -> WorkflowReplayer {
    let options =
        register_every_workflow(WorkflowReplayerOptions::new().data_converter(data_converter))
            .expect("registering the workflows for replay")
            .build();
    WorkflowReplayer::new(options).expect("creating the replayer")
}

/// One recorded history file.
struct Recorded {
    path: PathBuf,
    workflow_type: String,
    history: History,
}

fn histories_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/histories")
}

/// Every `tests/histories/*.json`, sorted by file name; a file that cannot be read or has no
/// `WorkflowExecutionStarted` first event fails the test, naming the file.
fn recorded_histories() -> Vec<Recorded> {
    recorded_in(&histories_dir())
}

/// Every `*.json` in `dir`, sorted by file name.
fn recorded_in(dir: &Path) -> Vec<Recorded> {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    let mut paths: Vec<PathBuf> = entries
        .map(|entry| entry.expect("listing the histories").path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths.into_iter().map(|path| load(&path)).collect()
}

fn load(path: &Path) -> Recorded {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let history: History = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{} is not a Temporal history: {e}", path.display()));
    let workflow_type = match history.events.first().and_then(|e| e.attributes.as_ref()) {
        Some(Attributes::WorkflowExecutionStartedEventAttributes(started)) => started
            .workflow_type
            .as_ref()
            .map(|t| t.name.clone())
            .unwrap_or_default(),
        _ => String::new(),
    };
    assert!(
        !workflow_type.is_empty(),
        "{}: the first event is not a WorkflowExecutionStarted with a workflow type",
        path.display()
    );
    Recorded {
        path: path.to_owned(),
        workflow_type,
        history,
    }
}

#[tokio::test]
async fn every_recorded_history_replays_deterministically() {
    let replayer = replayer();
    let registered = registered_types();
    let mut failures = Vec::new();
    let histories = recorded_histories();
    for recorded in &histories {
        let name = recorded
            .path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        if !registered.contains(&recorded.workflow_type.as_str()) {
            failures.push(format!(
                "{name} ({}): the worker registers no workflow of this type",
                recorded.workflow_type
            ));
            continue;
        }
        let events = recorded.history.events.len();
        let history = WorkflowHistory::from(recorded.history.clone());
        match replayer.replay_workflow(history).await {
            Ok(()) => println!(
                "replayed {name} ({}, {events} events)",
                recorded.workflow_type
            ),
            Err(error) => failures.push(format!(
                "{name} ({}, {events} events): {error}",
                recorded.workflow_type
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} recorded histories no longer replay against the workflow code. If the change \
         is intended, keep old runs working (ctx.patched, or a new workflow type) and refresh the \
         histories with dev/record-histories; see \"Upgrading workers safely\" in the README.\n  {}",
        failures.len(),
        histories.len(),
        failures.join("\n  ")
    );
}

#[test]
fn every_registered_workflow_has_a_recorded_history() {
    let recorded: Vec<String> = recorded_histories()
        .into_iter()
        .map(|r| r.workflow_type)
        .collect();
    let missing: Vec<&str> = registered_types()
        .into_iter()
        .filter(|name| !recorded.iter().any(|r| r == name))
        .collect();
    assert!(
        missing.is_empty(),
        "no history in {} for {missing:?}; record them with dev/record-histories",
        histories_dir().display()
    );
}

/// The histories recorded with encryption on, and the test key they were recorded with.
fn encrypted_histories() -> (Vec<Recorded>, DataConverter) {
    let dir = histories_dir().join("encrypted");
    let key_file = dir.join("test.keys");
    let text = fs::read_to_string(&key_file)
        .unwrap_or_else(|e| panic!("reading {}: {e}", key_file.display()));
    let keys =
        KeyRing::parse(&text, &key_file.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
    let settings = TemporalSettings {
        encryption: Some(Arc::new(keys)),
        ..TemporalSettings::plaintext("", "", "replay")
    };
    let histories = recorded_in(&dir);
    assert!(
        !histories.is_empty(),
        "no history recorded with encryption in {}",
        dir.display()
    );
    (histories, settings.data_converter())
}

/// The `encoding` of the run's input: what the recorded history really holds.
fn input_encoding(recorded: &Recorded) -> String {
    let Some(Attributes::WorkflowExecutionStartedEventAttributes(started)) = recorded
        .history
        .events
        .first()
        .and_then(|e| e.attributes.as_ref())
    else {
        return String::new();
    };
    started
        .input
        .as_ref()
        .and_then(|input| input.payloads.first())
        .and_then(|payload| payload.metadata.get("encoding"))
        .map(|encoding| String::from_utf8_lossy(encoding).into_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_history_recorded_with_encryption_replays_with_its_key() {
    let (histories, data_converter) = encrypted_histories();
    let replayer = replayer_with(data_converter);
    for recorded in &histories {
        let name = recorded.path.display();
        assert_eq!(
            input_encoding(recorded),
            ENCODING_ENCRYPTED,
            "{name}: the run's input is not encrypted; record it with a worker and CLI given the test key"
        );
        let history = WorkflowHistory::from(recorded.history.clone());
        if let Err(error) = replayer.replay_workflow(history).await {
            panic!(
                "{name} ({}, {} events) does not replay with its key: {error}",
                recorded.workflow_type,
                recorded.history.events.len()
            );
        }
        println!(
            "replayed {name} ({}, {} events) with its key",
            recorded.workflow_type,
            recorded.history.events.len()
        );
    }
}

#[tokio::test]
async fn without_the_key_an_encrypted_history_fails_to_replay_naming_the_key() {
    let (histories, _) = encrypted_histories();
    let replayer = replayer();
    for recorded in &histories {
        let history = WorkflowHistory::from(recorded.history.clone());
        let error = match replayer.replay_workflow(history).await {
            Ok(()) => panic!(
                "{} replayed without its key: a worker without keys would have run on ciphertext",
                recorded.path.display()
            ),
            Err(error) => format!("{error:#}"),
        };
        println!("{}: {error}", recorded.path.display());
        // The SDK's message quotes the codec's with its quotes escaped.
        assert!(
            error.contains("Failed decoding activation")
                && error.contains("a payload is encrypted (key")
                && error.contains("replay-test")
                && error.contains("has no payload encryption keys"),
            "{}: the replay failed without naming the key: {error}",
            recorded.path.display()
        );
    }
}
