//! Table tests of the revisions' numbering and of where `pool rollback` goes.

use super::*;
use crate::pool::from_yaml;

fn pool(hash: &str) -> ValidPool {
    let mut pool = from_yaml(include_str!("../../../../examples/pools/workers.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    pool.template_hash = hash.to_owned();
    pool.template.vm_size = format!("Standard_{hash}");
    pool
}

/// A rollout in a case: to which template, forward or back, and how it ended (`None`: it wrote
/// its start and never its end, as a terminated run).
#[derive(Clone, Copy)]
enum Step {
    Forward(&'static str, Option<RevisionOutcome>),
    Back(&'static str, Option<RevisionOutcome>),
}

fn start(hash: &str, rollback: bool, at: i64) -> RolloutStart {
    RolloutStart {
        pool: pool(hash),
        workflow_id: "rollout/dev/workers".to_owned(),
        run_id: format!("run-{at}"),
        rollback,
        at,
    }
}

fn run(steps: &[Step]) -> Revisions {
    let mut revisions = Revisions::default();
    for (index, step) in steps.iter().enumerate() {
        let at = 100 * i64::try_from(index).unwrap_or(0);
        let (hash, rollback, outcome) = match *step {
            Step::Forward(hash, outcome) => (hash, false, outcome),
            Step::Back(hash, outcome) => (hash, true, outcome),
        };
        let start = start(hash, rollback, at);
        revisions = revisions.apply(&RevisionChange::Started(start.clone()));
        if let Some(outcome) = outcome {
            let end = RolloutEnd {
                start,
                outcome,
                at: at + 50,
            };
            revisions = revisions.apply(&RevisionChange::Ended(end));
        }
    }
    revisions
}

/// Runs `steps` and checks the current revision and where a rollback goes (`Err` holds the start
/// of the refusal's message).
fn check(steps: &[Step], current: Option<&str>, target: Result<&str, &str>) {
    let revisions = run(steps);
    assert_eq!(
        revisions.current().map(|c| c.template_hash.as_str()),
        current,
        "current"
    );
    let found = revisions
        .rollback_target()
        .map(|t| t.template_hash.as_str())
        .map_err(|refusal| refusal.message("workers"));
    match (found, target) {
        (Ok(found), Ok(target)) => assert_eq!(found, target),
        (Err(message), Err(start)) => assert!(message.starts_with(start), "{message}"),
        (found, target) => panic!("found {found:?}, expected {target:?}"),
    }
}

use RevisionOutcome::{Aborted, Canceled, Completed, Failed};
use Step::{Back, Forward};

#[test]
fn a_rollback_goes_to_the_revision_before_the_current_one() {
    check(
        &[
            Forward("aaa", Some(Completed)),
            Forward("bbb", Some(Completed)),
        ],
        Some("bbb"),
        Ok("aaa"),
    );
}

#[test]
fn after_an_aborted_rollback_a_rollback_goes_to_the_same_target() {
    for outcome in [Some(Aborted), Some(Canceled), Some(Failed), None] {
        check(
            &[
                Forward("aaa", Some(Completed)),
                Forward("bbb", Some(Completed)),
                Back("aaa", outcome),
            ],
            Some("bbb"),
            Ok("aaa"),
        );
    }
}

#[test]
fn after_a_rollout_that_did_not_complete_a_rollback_goes_to_the_last_that_did() {
    for outcome in [Some(Canceled), Some(Failed), Some(Aborted), None] {
        check(
            &[
                Forward("aaa", Some(Completed)),
                Forward("bbb", Some(Completed)),
                Forward("ccc", outcome),
            ],
            Some("ccc"),
            Ok("bbb"),
        );
    }
}

#[test]
fn a_completed_rollback_toggles_like_rollout_undo() {
    let steps = [
        Forward("aaa", Some(Completed)),
        Forward("bbb", Some(Completed)),
        Back("aaa", Some(Completed)),
    ];
    check(&steps, Some("aaa"), Ok("bbb"));
    let revisions = run(&steps);
    let numbers: Vec<(u64, &str)> = revisions
        .entries
        .iter()
        .map(|e| (e.number, e.template_hash.as_str()))
        .collect();
    assert_eq!(numbers, [(2, "bbb"), (3, "aaa")]);
    let mut again = steps.to_vec();
    again.push(Back("bbb", Some(Completed)));
    check(&again, Some("bbb"), Ok("aaa"));
}

#[test]
fn with_one_revision_a_rollback_is_refused_naming_why() {
    check(&[], None, Err("no revision recorded for pool workers"));
    check(
        &[Forward("aaa", Some(Completed))],
        Some("aaa"),
        Err("no earlier revision of pool workers to roll back to"),
    );
    // A first rollout that never completed, then one that did: nothing completed before it.
    check(
        &[
            Forward("aaa", Some(Aborted)),
            Forward("bbb", Some(Completed)),
        ],
        Some("bbb"),
        Err(
            "no earlier revision of pool workers to roll back to: rollback needs a revision below the current one (revision 2, template bbb)",
        ),
    );
}

#[test]
fn rolling_to_the_current_template_again_keeps_its_number() {
    let revisions = run(&[
        Forward("aaa", Some(Completed)),
        Forward("bbb", Some(Completed)),
        Forward("bbb", Some(Completed)),
    ]);
    let numbers: Vec<u64> = revisions.entries.iter().map(|e| e.number).collect();
    assert_eq!(numbers, [1, 2]);
    // A forward rollout to an older template gives it a new number when it starts.
    let forward = run(&[
        Forward("aaa", Some(Completed)),
        Forward("bbb", Some(Completed)),
        Forward("aaa", None),
    ]);
    assert_eq!(forward.current().map(|c| c.number), Some(3));
    assert_eq!(
        forward.rollback_target().map(|t| t.template_hash.as_str()),
        Ok("bbb")
    );
}

#[test]
fn an_end_without_its_start_records_both() {
    let end = RolloutEnd {
        start: start("aaa", false, 10),
        outcome: Completed,
        at: 20,
    };
    let revisions = Revisions::default().apply(&RevisionChange::Ended(end));
    let entry = revisions.current().unwrap_or_else(|| panic!("an entry"));
    assert_eq!((entry.number, entry.outcome), (1, Completed));
    assert_eq!((entry.started_at, entry.ended_at), (10, Some(20)));
    assert!(entry.completed_once);
}

#[test]
fn only_the_newest_ten_revisions_are_kept() {
    const HASHES: [&str; 12] = [
        "h01", "h02", "h03", "h04", "h05", "h06", "h07", "h08", "h09", "h10", "h11", "h12",
    ];
    let steps: Vec<Step> = HASHES
        .iter()
        .map(|hash| Forward(hash, Some(Completed)))
        .collect();
    let revisions = run(&steps);
    assert_eq!(revisions.entries.len(), REVISION_HISTORY_LIMIT);
    assert_eq!(revisions.entries.first().map(|e| e.number), Some(3));
    assert_eq!(revisions.current().map(|e| e.number), Some(12));
    let bytes: usize = revisions.to_data().values().map(String::len).sum();
    assert!(bytes < MAX_DATA_BYTES, "{bytes}");
}

#[test]
fn the_data_parses_back_and_bad_keys_are_named() {
    let revisions = run(&[Forward("aaa", Some(Completed)), Forward("bbb", None)]);
    let data = revisions.to_data();
    let config_map = "nodewright/nodewright-revisions-workers";
    assert_eq!(
        Revisions::parse(config_map, &StoredRevisions::Found(data.clone())),
        Ok(revisions)
    );
    assert_eq!(
        Revisions::parse(config_map, &StoredRevisions::Absent),
        Ok(Revisions::default())
    );
    let mut broken = data.clone();
    broken.insert("bbb".to_owned(), "{not json".to_owned());
    let error =
        Revisions::parse(config_map, &StoredRevisions::Found(broken)).expect_err("a broken key");
    assert!(
        error.to_string().starts_with(
            "the ConfigMap nodewright/nodewright-revisions-workers holds a revision that does not parse at key bbb"
        ),
        "{error}"
    );
    let mut moved = data;
    let aaa = moved.get("aaa").cloned().unwrap_or_default();
    moved.insert("ccc".to_owned(), aaa);
    let error = Revisions::parse(config_map, &StoredRevisions::Found(moved))
        .expect_err("a key that holds another template");
    assert!(error.to_string().contains("at key ccc"), "{error}");
    let foreign = Revisions::parse(config_map, &StoredRevisions::Foreign).expect_err("foreign");
    assert!(
        foreign.to_string().contains("is not nodewright's"),
        "{foreign}"
    );
}

#[test]
fn history_rows_say_which_is_current_which_rollback_picks_and_which_ended_without_a_word() {
    let revisions = run(&[
        Forward("aaa", Some(Completed)),
        Forward("bbb", Some(Completed)),
        Forward("ccc", None),
    ]);
    let shown = |running: bool| -> Vec<(u64, String, bool, bool)> {
        revisions
            .rows(running)
            .into_iter()
            .map(|r| (r.number, r.outcome, r.current, r.rollback_target))
            .collect()
    };
    assert_eq!(
        shown(false),
        [
            (1, "completed".to_owned(), false, false),
            (2, "completed".to_owned(), false, true),
            (3, ENDED_WITHOUT_A_WORD.to_owned(), true, false),
        ]
    );
    assert_eq!(shown(true)[2].1, "running");
    // A start without an end that is not the newest start never shows as running.
    let later = run(&[
        Forward("aaa", Some(Completed)),
        Forward("bbb", None),
        Back("aaa", None),
    ]);
    let outcomes: Vec<String> = later.rows(true).into_iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, ["running", ENDED_WITHOUT_A_WORD]);
}

#[test]
fn an_inline_bootstrap_is_left_out_and_the_completing_run_named() {
    let mut inline = pool("aaa");
    inline.template.bootstrap = Some("kubeadm join --token abcdef.0123456789abcdef".to_owned());
    let start = RolloutStart {
        pool: inline,
        workflow_id: "rollout/dev/workers".to_owned(),
        run_id: "first".to_owned(),
        rollback: false,
        at: 1,
    };
    let started = Revisions::default().apply(&RevisionChange::Started(start.clone()));
    let data: String = started.to_data().into_values().collect();
    assert!(!data.contains("abcdef.0123456789abcdef"), "{data}");
    let entry = started.current().unwrap_or_else(|| panic!("an entry"));
    assert!(entry.bootstrap_omitted && entry.pool.template.bootstrap.is_none());
    assert_eq!(entry.completed_run_id, None);
    let mut end = RolloutEnd {
        start,
        outcome: Completed,
        at: 2,
    };
    end.start.run_id = "continued".to_owned();
    let ended = started.apply(&RevisionChange::Ended(end));
    let entry = ended.current().unwrap_or_else(|| panic!("an entry"));
    assert_eq!(entry.completed_run_id.as_deref(), Some("continued"));
    assert_eq!(
        entry.run_id, "first",
        "the entry names the rollout's first run"
    );
    // A template without inline text is kept whole.
    let mut by_reference = pool("bbb");
    by_reference.template.bootstrap = None;
    let kept = kept_spec(&by_reference);
    assert_eq!(kept, (by_reference, false));
}

/// (number, template, outcome) of each revision, lowest number first.
fn numbered(revisions: &Revisions) -> Vec<(u64, &str, RevisionOutcome)> {
    revisions
        .entries
        .iter()
        .map(|e| (e.number, e.template_hash.as_str(), e.outcome))
        .collect()
}

#[test]
fn a_rollback_to_a_target_the_revisions_lack_waits_below_the_current_one_until_it_completes() {
    use RevisionOutcome::Running;
    // Right after the upgrade the revisions hold only bbb; `pool rollback` found aaa in
    // Temporal's history. While it runs, and after it was aborted, bbb stays current.
    let running = run(&[Forward("bbb", Some(Completed)), Back("aaa", None)]);
    assert_eq!(
        numbered(&running),
        [(0, "aaa", Running), (1, "bbb", Completed)]
    );
    check(
        &[Forward("bbb", Some(Completed)), Back("aaa", None)],
        Some("bbb"),
        Err("no earlier revision of pool workers to roll back to"),
    );
    for outcome in [Aborted, Canceled, Failed] {
        let ended = run(&[Forward("bbb", Some(Completed)), Back("aaa", Some(outcome))]);
        assert_eq!(
            numbered(&ended),
            [(0, "aaa", outcome), (1, "bbb", Completed)]
        );
    }
    // Completed, it takes the next number and toggles.
    check(
        &[
            Forward("bbb", Some(Completed)),
            Back("aaa", Some(Completed)),
        ],
        Some("aaa"),
        Ok("bbb"),
    );
    // No number free below the current revision: recorded only once it completed.
    let dense = [
        Forward("bbb", Some(Completed)),
        Back("aaa", Some(Aborted)),
        Back("ccc", None),
    ];
    assert_eq!(
        numbered(&run(&dense)),
        [(0, "aaa", Aborted), (1, "bbb", Completed)]
    );
    let mut completed = dense.to_vec();
    completed[2] = Back("ccc", Some(Completed));
    assert_eq!(
        numbered(&run(&completed)),
        [
            (0, "aaa", Aborted),
            (1, "bbb", Completed),
            (2, "ccc", Completed)
        ]
    );
    // Nothing recorded yet: nothing until it completes.
    assert_eq!(run(&[Back("aaa", None)]), Revisions::default());
    assert_eq!(run(&[Back("aaa", Some(Aborted))]), Revisions::default());
    check(
        &[Back("aaa", Some(Completed))],
        Some("aaa"),
        Err("no earlier"),
    );
}

#[test]
fn an_end_without_its_start_names_this_rollout_not_an_older_one_of_the_template() {
    let before = run(&[
        Forward("aaa", Some(Completed)),
        Forward("bbb", Some(Completed)),
    ]);
    // (template, rollback, outcome) → (number, run, started_at, rollback) of its entry.
    let table = [
        ("aaa", false, Completed, (3, "run-500", 500, false)),
        ("aaa", false, Aborted, (3, "run-500", 500, false)),
        ("aaa", true, Completed, (3, "run-500", 500, true)),
        ("aaa", true, Aborted, (1, "run-500", 500, true)),
        ("bbb", false, Failed, (2, "run-500", 500, false)),
    ];
    for (hash, rollback, outcome, expected) in table {
        let end = RolloutEnd {
            start: start(hash, rollback, 500),
            outcome,
            at: 550,
        };
        let after = before.apply(&RevisionChange::Ended(end));
        let entry = after
            .entries
            .iter()
            .find(|e| e.template_hash == hash)
            .unwrap_or_else(|| panic!("an entry of {hash}"));
        assert_eq!(
            (
                entry.number,
                entry.run_id.as_str(),
                entry.started_at,
                entry.rollback
            ),
            expected,
            "{hash} rollback {rollback} {outcome:?}"
        );
        assert_eq!(
            (entry.outcome, entry.ended_at),
            (outcome, Some(550)),
            "{hash}"
        );
        assert!(entry.completed_once, "{hash}: it completed once before");
    }
}
