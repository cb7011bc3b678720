//! Replays every recorded history in `tests/histories/` against today's workflow code, with the
//! same workflows the worker registers (`nodewright_workflows::registry`). A change that alters the
//! commands a workflow issues for an existing history (a reordered, added or removed activity,
//! timer or child workflow) fails here, before it ships to workers that still have such runs in
//! flight. Needs no stack: activities are not executed, their results come from the history.
//!
//! `dev/record-histories` refreshes the histories from the local stack after an intended change;
//! see "Upgrading workers safely" in the README.
//!
//! Every patch marker the workflow code asks (`ctx.patched(ID)`) must appear in at least one
//! recorded history (`<Type>-<id>.json`, recorded by `dev/record-histories`), so that the replay
//! covers the commands of its patched branch too; [`NO_HISTORY_YET`] lists, with the reason, the
//! markers no end-to-end case reaches.
//!
//! `tests/histories/encrypted/` holds histories recorded with payload encryption on, under the
//! test key `tests/histories/encrypted/test.keys` (a key for these tests only, never used
//! anywhere real): they replay with the codec's data converter given that key, and without it
//! the replay fails naming the key, instead of passing on ciphertext.

// The test harness reads histories from files and settings from the environment; workflows/
// clippy.toml bans that in workflow code, not here.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nodewright_connect::TemporalSettings;
use nodewright_connect::codec::{ENCODING_ENCRYPTED, KeyRing};
use nodewright_workflows::registry::{register_every_workflow, registered_types};
use temporalio_client::WorkflowHistory;
use temporalio_common::data_converters::DataConverter;
use temporalio_common::protos::constants::PATCH_MARKER_NAME;
use temporalio_common::protos::coresdk::common::decode_change_marker_details;
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

/// Patch markers no recorded history has to carry, each with the reason no end-to-end case
/// reaches its branch. A marker listed here that some history does carry fails the check below:
/// take it off the list then.
const NO_HISTORY_YET: &[(&str, &str)] = &[
    (
        "drain-annotation-per-field",
        // drain_node/settings.rs: a fresh drain takes "drain-annotation-bounded" first, so this
        // is asked only by a drain continued as new (`request.resume`) whose Node carries a
        // refused drain-policy annotation and whose request carries no settings. No e2e case
        // drains long enough to continue as new (the full pass of 2026-11-27 has no DrainNode
        // run that continued as new).
        "only a drain continued as new with a refused annotation asks it; no e2e drain continues as new",
    ),
    (
        "rollout-no-start-after-cancel",
        // rolling_update/mod.rs: asked only when the cancellation request lands while a round's
        // look (its read activities) is in flight and the plan would start children: a race of
        // a few hundred milliseconds that cancel::rollout cannot aim at (no run of the full
        // pass of 2026-11-27 recorded it).
        "only a cancellation that lands during a round's look, with children to start, asks it: a race no e2e case aims at",
    ),
    (
        "rollout-name-collisions",
        // rolling_update/children.rs: asked only when a drawn name is one the rollout observed
        // (odds of 1 in 27^5 / n per draw) or a create child failed because its name was taken:
        // no e2e rollout can aim at either.
        "only a name drawn twice or a create whose name was taken asks it: chance events no e2e rollout aims at",
    ),
];

/// The patch ids of every `.patched(ARG)` call in `sources` (path and text of each file), with
/// the places that ask them, or what could not be read. `ARG` is a string literal or the name of
/// a `const NAME: &str = "...";`, looked up in the same file, else in the files of the same
/// folder, else anywhere (where it must be unique). Comment lines are skipped.
fn patch_ids_in(sources: &[(PathBuf, String)]) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut ids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (path, text) in sources {
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for (at, _) in line.match_indices(".patched(") {
                let rest = &line[at + ".patched(".len()..];
                let argument = rest.split(')').next().unwrap_or_default().trim();
                let place = format!("{}:{}", path.display(), number + 1);
                let id = match argument.strip_prefix('"') {
                    Some(literal) => literal.trim_end_matches('"').to_owned(),
                    None => const_value(sources, path, argument)
                        .map_err(|e| format!("{place}: patched({argument}): {e}"))?,
                };
                ids.entry(id).or_default().push(place);
            }
        }
    }
    Ok(ids)
}

/// The value of `const NAME: &str = "...";` as seen from `from`: see [`patch_ids_in`].
fn const_value(sources: &[(PathBuf, String)], from: &Path, name: &str) -> Result<String, String> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err("the argument is neither a string literal nor a constant's name".to_owned());
    }
    let declaration = format!("const {name}: &str = \"");
    let values_in = |files: &mut dyn Iterator<Item = &(PathBuf, String)>| -> BTreeSet<String> {
        files
            .flat_map(|(_, text)| {
                text.match_indices(&declaration)
                    .map(|(at, _)| at)
                    .map(|at| {
                        let value = &text[at + declaration.len()..];
                        value.split('"').next().unwrap_or_default().to_owned()
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let folder = from.parent();
    let scopes: [&dyn Fn(&Path) -> bool; 3] = [
        &|path| path == from,
        &|path| path.parent() == folder,
        &|_| true,
    ];
    for in_scope in scopes {
        let found = values_in(&mut sources.iter().filter(|(path, _)| in_scope(path)));
        match found.len() {
            0 => continue,
            1 => return Ok(found.into_iter().next().unwrap_or_default()),
            _ => {
                return Err(format!(
                    "{} constants of that name with different values: {}",
                    found.len(),
                    found.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    Err(format!("no `{declaration}...\";` in the sources"))
}

/// Every `.rs` file under `dir`, with its text, sorted by path.
fn rust_sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_owned()];
    while let Some(folder) = folders.pop() {
        let entries =
            fs::read_dir(&folder).unwrap_or_else(|e| panic!("reading {}: {e}", folder.display()));
        for entry in entries {
            let path = entry.expect("listing the sources").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
                // Named from the crate's folder, as `src/drain_node/state.rs`.
                let name = path
                    .strip_prefix(dir.parent().unwrap_or(dir))
                    .unwrap_or(&path);
                files.push((name.to_owned(), text));
            }
        }
    }
    files.sort();
    files
}

/// The patch ids `recorded` records in `core_patch` markers.
fn markers_in(recorded: &Recorded) -> BTreeSet<String> {
    recorded
        .history
        .events
        .iter()
        .filter_map(|event| match event.attributes.as_ref() {
            Some(Attributes::MarkerRecordedEventAttributes(marker))
                if marker.marker_name == PATCH_MARKER_NAME =>
            {
                decode_change_marker_details(&marker.details).map(|(id, _)| id)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn every_patch_marker_of_the_workflow_code_is_in_a_recorded_history() {
    let sources = rust_sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let asked = patch_ids_in(&sources).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !asked.is_empty(),
        "found no ctx.patched(...) in workflows/src: the scan is broken"
    );
    let mut recorded: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for history in recorded_histories() {
        let name = history
            .path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        for id in markers_in(&history) {
            recorded.entry(id).or_default().push(name.clone());
        }
    }
    let mut problems = Vec::new();
    for (id, places) in &asked {
        let excused = NO_HISTORY_YET.iter().any(|(excused, _)| excused == id);
        match (recorded.get(id), excused) {
            (None, false) => problems.push(format!(
                "marker \"{id}\" (asked at {}) is in no recorded history: run the end-to-end \
                 case that reaches its branch, then dev/record-histories (it records \
                 <Type>-{id}.json), or list it in NO_HISTORY_YET with the reason",
                places.join(", ")
            )),
            (Some(files), true) => problems.push(format!(
                "marker \"{id}\" is in NO_HISTORY_YET but recorded in {}: take it off the list",
                files.join(", ")
            )),
            _ => {}
        }
    }
    for (id, _) in NO_HISTORY_YET {
        if !asked.contains_key(*id) {
            problems.push(format!(
                "NO_HISTORY_YET lists \"{id}\", which the workflow code no longer asks: take it off"
            ));
        }
    }
    for (id, files) in &recorded {
        println!("marker \"{id}\" recorded in {}", files.join(", "));
    }
    assert!(
        problems.is_empty(),
        "{} problem(s) with the patch markers' recorded histories:\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn the_patch_id_scan_reads_literals_and_constants_in_file_folder_and_crate() {
    let file = |path: &str, text: &str| (PathBuf::from(path), text.to_owned());
    let sources = [
        file(
            "src/a/mod.rs",
            "const P: &str = \"a-own\";\nfn f() { ctx.patched(P); ctx.patched(HOOKS); }\n",
        ),
        file(
            "src/a/hooks.rs",
            "pub(super) const HOOKS: &str = \"a-hooks\";\n",
        ),
        file(
            "src/b/mod.rs",
            "const P: &str = \"b-own\";\n// ctx.patched(NOT_A_CALL)\nfn g() { ctx\n    .patched(P); ctx.patched(\"b-literal\"); ctx.patched(SHARED) }\n",
        ),
        file("src/shared.rs", "pub const SHARED: &str = \"shared\";\n"),
    ];
    let ids = patch_ids_in(&sources).expect("every argument resolves");
    let found: Vec<&str> = ids.keys().map(String::as_str).collect();
    assert_eq!(found, ["a-hooks", "a-own", "b-literal", "b-own", "shared"]);
    assert_eq!(ids["a-own"], ["src/a/mod.rs:2"]);

    let unknown = [file("src/c.rs", "fn h() { ctx.patched(MISSING); }\n")];
    let error = patch_ids_in(&unknown).expect_err("an unknown constant");
    assert!(
        error.contains("src/c.rs:1") && error.contains("MISSING"),
        "{error}"
    );

    let ambiguous = [
        file("src/d/x.rs", "const P: &str = \"one\";\n"),
        file("src/e/y.rs", "const P: &str = \"two\";\n"),
        file("src/f.rs", "fn h() { ctx.patched(P); }\n"),
    ];
    let error = patch_ids_in(&ambiguous).expect_err("two constants of one name");
    assert!(error.contains("one, two"), "{error}");
}
