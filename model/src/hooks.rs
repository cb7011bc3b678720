//! Delete hooks, after Cluster API's `pre-drain.delete.hook.machine.cluster.x-k8s.io/<name>`
//! and `pre-terminate.delete.hook.machine.cluster.x-k8s.io/<name>`: a Node annotation
//! `pre-drain.delete.hook.nodewright.io/<owner>` holds a DeleteMachine before its drain, one
//! `pre-terminate.delete.hook.nodewright.io/<owner>` holds it after the drain, before its VM
//! delete, while any annotation of that kind is present. Their owners (another controller, a
//! person) remove them; nodewright never does.
//!
//! Unlike Cluster API, which waits for ever, a hold here is bounded ([`DEFAULT_HOOK_TIMEOUT`],
//! or the request's `hookTimeout`): past it the delete fails and leaves the machine in place
//! (cordoned and drained when the hold came after the drain), naming the hooks and
//! `--skip-hooks`. [`hooks_on_node`] reads a Node's annotations; [`decide_hold`] decides, at
//! each look, whether the run goes on, waits (and when it looks again) or gives up.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::limits::short;
use crate::time::{deadline_after, left_until};

/// The prefix of the annotations that hold a delete before its drain.
pub const PRE_DRAIN_PREFIX: &str = "pre-drain.delete.hook.nodewright.io/";
/// The prefix of the annotations that hold a delete after its drain, before its VM delete.
pub const PRE_TERMINATE_PREFIX: &str = "pre-terminate.delete.hook.nodewright.io/";

/// How long one hold may last when the request does not say (`machine delete --hook-timeout`).
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The time between two looks at the Node's annotations during the first
/// [`SLOW_LOOKS_AFTER`] of a hold (a durable timer between two `kube.read_delete_hooks`).
pub const LOOK_INTERVAL: Duration = Duration::from_secs(10);

/// How long a hold is looked at every [`LOOK_INTERVAL`]; after that every
/// [`SLOW_LOOK_INTERVAL`], so that a hold of hours stays a short history.
pub const SLOW_LOOKS_AFTER: Duration = Duration::from_secs(30 * 60);

/// The time between two looks once a hold has lasted [`SLOW_LOOKS_AFTER`].
pub const SLOW_LOOK_INTERVAL: Duration = Duration::from_secs(60);

/// How many hooks of one stage a look keeps (sorted by name); more are counted, not named.
pub const MAX_HOOKS_KEPT: usize = 32;

/// How many hooks a message for people names; the rest are counted (`and 3 more`).
pub const MAX_HOOKS_NAMED: usize = 5;

/// The longest hook annotation a message shows in full; a longer one ends in `…`. Kubernetes
/// allows 253 characters of prefix and 63 of name.
pub const MAX_HOOK_NAME_CHARS: usize = 100;

/// The two points of a delete a hook can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HookStage {
    /// Before the drain (and before `--skip-drain`'s cordon).
    PreDrain,
    /// After the drain, before the VM delete.
    PreTerminate,
}

impl HookStage {
    /// The annotation prefix of this stage's hooks.
    pub const fn prefix(self) -> &'static str {
        match self {
            HookStage::PreDrain => PRE_DRAIN_PREFIX,
            HookStage::PreTerminate => PRE_TERMINATE_PREFIX,
        }
    }

    /// `pre-drain` or `pre-terminate`.
    pub const fn as_str(self) -> &'static str {
        match self {
            HookStage::PreDrain => "pre-drain",
            HookStage::PreTerminate => "pre-terminate",
        }
    }

    /// What a hook of this stage holds back, in words.
    pub const fn holds(self) -> &'static str {
        match self {
            HookStage::PreDrain => "the drain",
            HookStage::PreTerminate => "the VM delete",
        }
    }
}

impl std::fmt::Display for HookStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The hooks of one stage on a Node: their annotation keys, sorted, at most
/// [`MAX_HOOKS_KEPT`], and how many there are in all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookSet {
    /// The annotation keys (prefix and owner), sorted.
    pub names: Vec<String>,
    /// How many hooks of the stage the Node carries (more than `names` holds when there are
    /// more than [`MAX_HOOKS_KEPT`]).
    pub total: usize,
}

impl HookSet {
    /// Whether no hook of the stage is present.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The hooks for a message: at most [`MAX_HOOKS_NAMED`], each at most
    /// [`MAX_HOOK_NAME_CHARS`] characters, the rest counted: `a, b and 3 more`.
    pub fn describe(&self) -> String {
        let shown: Vec<String> = self
            .names
            .iter()
            .take(MAX_HOOKS_NAMED)
            .map(|name| shorten(name))
            .collect();
        let rest = self.total.saturating_sub(shown.len());
        let mut text = shown.join(", ");
        if rest > 0 {
            text.push_str(&format!(" and {rest} more"));
        }
        text
    }
}

/// The delete hooks a Node carries, by stage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeHooks {
    /// The `pre-drain.delete.hook.nodewright.io/<owner>` annotations.
    #[serde(default)]
    pub pre_drain: HookSet,
    /// The `pre-terminate.delete.hook.nodewright.io/<owner>` annotations.
    #[serde(default)]
    pub pre_terminate: HookSet,
}

impl NodeHooks {
    /// The hooks of `stage`.
    pub fn of(&self, stage: HookStage) -> &HookSet {
        match stage {
            HookStage::PreDrain => &self.pre_drain,
            HookStage::PreTerminate => &self.pre_terminate,
        }
    }
}

/// Which hooks a Node's annotations hold each stage with. An annotation holds a stage when its
/// key is the stage's prefix followed by a non-empty owner; a key that is the bare prefix (no
/// owner: Kubernetes refuses it, so it cannot come from the API) is ignored, as are the values
/// (free text for the owner) and every other annotation, Cluster API's own among them.
pub fn hooks_on_node(annotations: &BTreeMap<String, String>) -> NodeHooks {
    let of = |stage: HookStage| {
        let mut set = HookSet::default();
        for key in annotations.keys() {
            let Some(owner) = key.strip_prefix(stage.prefix()) else {
                continue;
            };
            if owner.trim().is_empty() {
                continue;
            }
            set.total += 1;
            if set.names.len() < MAX_HOOKS_KEPT {
                set.names.push(key.clone());
            }
        }
        set
    };
    NodeHooks {
        pre_drain: of(HookStage::PreDrain),
        pre_terminate: of(HookStage::PreTerminate),
    }
}

/// A hold, as far as the run is: since when and until when it may last (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// When the first look found the stage held.
    pub since: i64,
    /// When the hold times out: `since` plus the hook timeout.
    pub until: i64,
}

impl Held {
    /// A hold found at `now`, bounded by `timeout`.
    pub fn starting(now: i64, timeout: Duration) -> Self {
        Self {
            since: now,
            until: deadline_after(now, timeout),
        }
    }
}

/// What a look at the hooks of a stage means for the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldStep {
    /// No hook holds the stage: go on.
    Go,
    /// Hooks are present but the request says `--skip-hooks`: go on, and record these.
    Skip(HookSet),
    /// Hooks hold the stage: look again after `next_look`.
    Wait {
        /// The hooks that hold it.
        hooks: HookSet,
        /// The wait before the next look (never past the hold's end).
        next_look: Duration,
    },
    /// Hooks still hold the stage at the end of the hold: the delete fails with `message`.
    TimedOut {
        /// The reason, naming the hooks, the timeout and `--skip-hooks`.
        message: String,
    },
}

/// Decides, at a look at `now` (Unix seconds) that found `hooks` for `stage`, whether the delete
/// of `machine` goes on, waits or gives up. `held` is the hold so far (the caller starts it at
/// the first look that finds hooks, with [`Held::starting`]).
pub fn decide_hold(
    machine: &str,
    stage: HookStage,
    hooks: &HookSet,
    skip_hooks: bool,
    held: Held,
    now: i64,
) -> HoldStep {
    if hooks.is_empty() {
        return HoldStep::Go;
    }
    if skip_hooks {
        return HoldStep::Skip(hooks.clone());
    }
    let left = left_until(now, held.until);
    if left.is_zero() {
        let timeout = left_until(held.since, held.until);
        let stays = match stage {
            HookStage::PreDrain => "the machine is left as it was (not drained, not cordoned)",
            HookStage::PreTerminate => "the machine is left in place, drained and cordoned",
        };
        return HoldStep::TimedOut {
            message: format!(
                "{stage} hooks still held {} after the hook timeout {}: {}; {stays}. Their owners remove them when done; to delete regardless run `nodewright machine delete {machine} --skip-hooks` (the hooks stay on the Node)",
                stage.holds(),
                short(timeout),
                hooks.describe()
            ),
        };
    }
    let held_for = left_until(held.since, now);
    let interval = if held_for < SLOW_LOOKS_AFTER {
        LOOK_INTERVAL
    } else {
        SLOW_LOOK_INTERVAL
    };
    HoldStep::Wait {
        hooks: hooks.clone(),
        next_look: interval.min(left),
    }
}

/// `name` cut to [`MAX_HOOK_NAME_CHARS`] characters, ending in `…` when cut.
fn shorten(name: &str) -> String {
    if name.chars().count() <= MAX_HOOK_NAME_CHARS {
        return name.to_owned();
    }
    let mut cut: String = name.chars().take(MAX_HOOK_NAME_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(keys: &[&str]) -> BTreeMap<String, String> {
        keys.iter()
            .map(|k| ((*k).to_owned(), "owner's note".to_owned()))
            .collect()
    }

    fn set(names: &[&str]) -> HookSet {
        HookSet {
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            total: names.len(),
        }
    }

    fn check(case: &str, keys: &[&str], pre_drain: &[&str], pre_terminate: &[&str]) {
        let found = hooks_on_node(&annotations(keys));
        assert_eq!(found.pre_drain, set(pre_drain), "{case}: pre-drain");
        assert_eq!(
            found.pre_terminate,
            set(pre_terminate),
            "{case}: pre-terminate"
        );
    }

    #[test]
    fn annotations_hold_the_stage_their_prefix_names() {
        let a = "pre-drain.delete.hook.nodewright.io/backup";
        let b = "pre-drain.delete.hook.nodewright.io/a-operator";
        let t = "pre-terminate.delete.hook.nodewright.io/lb";
        for (case, keys, pre_drain, pre_terminate) in [
            ("no annotation holds nothing", vec![], vec![], vec![]),
            ("one pre-drain hook", vec![a], vec![a], vec![]),
            (
                "two pre-drain hooks, sorted",
                vec![a, b],
                vec![b, a],
                vec![],
            ),
            ("one of each stage", vec![a, t], vec![a], vec![t]),
            (
                "the bare prefix (no owner) is ignored",
                vec![
                    "pre-drain.delete.hook.nodewright.io/",
                    "pre-terminate.delete.hook.nodewright.io/ ",
                ],
                vec![],
                vec![],
            ),
            (
                "Cluster API's hooks and other annotations are not ours",
                vec![
                    "pre-drain.delete.hook.machine.cluster.x-k8s.io/x",
                    "pre-terminate.delete.hook.machine.cluster.x-k8s.io/x",
                    "nodewright.io/drain-policy",
                    "example.com/pre-drain.delete.hook.nodewright.io/x",
                    "pre-drain.delete.hook.nodewright.io",
                    "Pre-drain.delete.hook.nodewright.io/x",
                ],
                vec![],
                vec![],
            ),
        ] {
            check(case, &keys, &pre_drain, &pre_terminate);
        }
    }

    proptest::proptest! {
        #[test]
        fn every_hook_is_counted_and_messages_stay_bounded(
            keys in proptest::collection::btree_set(
                proptest::prop_oneof![
                    "pre-drain\\.delete\\.hook\\.nodewright\\.io/[a-z ]{0,80}",
                    "pre-terminate\\.delete\\.hook\\.nodewright\\.io/[a-z]{0,3}",
                    "[a-z./-]{0,40}",
                ],
                0..80,
            )
        ) {
            let map: BTreeMap<String, String> =
                keys.iter().map(|k| (k.clone(), String::new())).collect();
            let found = hooks_on_node(&map);
            for stage in [HookStage::PreDrain, HookStage::PreTerminate] {
                let set = found.of(stage);
                let expected = keys
                    .iter()
                    .filter(|k| k.strip_prefix(stage.prefix()).is_some_and(|o| !o.trim().is_empty()))
                    .count();
                proptest::prop_assert_eq!(set.total, expected);
                proptest::prop_assert!(set.names.len() <= MAX_HOOKS_KEPT);
                proptest::prop_assert!(set.names.iter().all(|n| keys.contains(n)));
                let text = set.describe();
                proptest::prop_assert!(
                    text.chars().count() <= MAX_HOOKS_NAMED * (MAX_HOOK_NAME_CHARS + 2) + 20
                );
            }
        }
    }

    #[test]
    fn a_look_keeps_a_bounded_number_of_hooks_and_counts_them_all() {
        let keys: Vec<String> = (0..100)
            .map(|i| format!("{PRE_TERMINATE_PREFIX}owner-{i:03}"))
            .collect();
        let map = keys.iter().map(|k| (k.clone(), String::new())).collect();
        let found = hooks_on_node(&map);
        assert_eq!(found.pre_terminate.total, 100);
        assert_eq!(found.pre_terminate.names.len(), MAX_HOOKS_KEPT);
        assert!(found.pre_drain.is_empty());
        let text = found.pre_terminate.describe();
        assert!(text.ends_with(" and 95 more"), "{text}");
        assert_eq!(text.matches(PRE_TERMINATE_PREFIX).count(), MAX_HOOKS_NAMED);
    }

    #[test]
    fn messages_cut_long_hook_names() {
        let long = format!("{PRE_DRAIN_PREFIX}{}", "x".repeat(300));
        let text = set(&[&long]).describe();
        assert_eq!(text.chars().count(), MAX_HOOK_NAME_CHARS);
        assert!(text.ends_with('…'), "{text}");
        assert_eq!(set(&["a", "b"]).describe(), "a, b");
    }

    #[test]
    fn a_hold_goes_on_waits_skips_or_times_out() {
        let hooks = set(&["pre-drain.delete.hook.nodewright.io/backup"]);
        let held = Held::starting(1_000, Duration::from_secs(1_800));
        let step = |hooks: &HookSet, skip: bool, now: i64| {
            decide_hold("w-x7k2q", HookStage::PreDrain, hooks, skip, held, now)
        };
        assert_eq!(step(&HookSet::default(), false, 1_000), HoldStep::Go);
        assert_eq!(step(&HookSet::default(), true, 1_000), HoldStep::Go);
        assert_eq!(step(&hooks, true, 1_000), HoldStep::Skip(hooks.clone()));
        assert_eq!(
            step(&hooks, false, 1_000),
            HoldStep::Wait {
                hooks: hooks.clone(),
                next_look: LOOK_INTERVAL
            }
        );
        assert_eq!(
            step(&hooks, false, 2_795),
            HoldStep::Wait {
                hooks: hooks.clone(),
                next_look: Duration::from_secs(5)
            },
            "never waits past the hold's end"
        );
        let HoldStep::TimedOut { message } = step(&hooks, false, 2_800) else {
            panic!("times out at the end of the hold");
        };
        for part in [
            "pre-drain hooks still held the drain after the hook timeout 30m",
            "pre-drain.delete.hook.nodewright.io/backup",
            "not cordoned",
            "nodewright machine delete w-x7k2q --skip-hooks",
        ] {
            assert!(message.contains(part), "{part} in {message}");
        }
    }

    #[test]
    fn long_holds_are_looked_at_less_often() {
        let hooks = set(&["pre-terminate.delete.hook.nodewright.io/lb"]);
        let held = Held::starting(0, Duration::from_secs(6 * 3600));
        let wait =
            |now: i64| match decide_hold("m", HookStage::PreTerminate, &hooks, false, held, now) {
                HoldStep::Wait { next_look, .. } => next_look,
                other => panic!("waits at {now}: {other:?}"),
            };
        assert_eq!(wait(1_799), LOOK_INTERVAL);
        assert_eq!(wait(1_800), SLOW_LOOK_INTERVAL);
        let HoldStep::TimedOut { message } =
            decide_hold("m", HookStage::PreTerminate, &hooks, false, held, 6 * 3600)
        else {
            panic!("times out");
        };
        assert!(message.contains("drained and cordoned"), "{message}");
        assert!(message.contains("the VM delete"), "{message}");
    }
}
