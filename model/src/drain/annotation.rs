//! The Node annotation [`super::ANNOTATION_DRAIN_POLICY`] bounded by the pool's drain settings,
//! and the VM tag [`TAG_DRAIN`] that carries those settings where a Node cannot write.
//!
//! # Who can write what
//!
//! A Node's own kubelet may write annotations on its Node (the NodeRestriction admission plugin
//! limits labels only), and so may anyone with `patch` on nodes. So the annotation is a wish,
//! never a setting: a compromised node must not be able to drain itself in force mode at once
//! (grace 0, budgets bypassed) or wait for ever. The trusted settings (the **baseline**) come,
//! in this order, from the request (`machine drain` flags, a rollout's pool file), from the
//! VM's [`TAG_DRAIN`] tag (written by CreateMachine when it creates the VM: a Node cannot write
//! ARM tags), or the defaults (VMs created before the tag existed).
//!
//! # The safe direction
//!
//! [`bound_annotation`] takes from the annotation, field by field, only what makes the drain
//! more patient or more careful than the baseline, never beyond [`crate::limits`]:
//!
//! - `timeout`, `forceAfterUnhealthy`, `volumeDetachTimeout`, `volumeAttachTimeout`: at least
//!   the baseline's (force mode never comes earlier, a volume is never given up on sooner), at
//!   most the field's maximum;
//! - `pdbRetryInterval`: between the baseline's and its maximum (a PodDisruptionBudget is never
//!   asked more often than the pool says);
//! - `localData`: only towards keeping data. For a **maintenance** drain `refuse` is the careful
//!   choice (the VM stays, so a pod left on it keeps its data; an eviction loses it for good), so
//!   the annotation may turn `evict` into `refuse`, never the other way. For a **deletion**
//!   drain the data goes with the VM whatever the drain does: `refuse` saves nothing and would
//!   only let a node keep itself from being deleted, and `evict` would override a pool that asked
//!   to stop, so the annotation may change nothing (see [`super::local_data`]).
//!
//! - `rules`: taken when the baseline has none (the annotation is how a pool's rules reach a
//!   later `machine drain`, which has no pool file; the VM tag is too short for them), never
//!   over the baseline's own. A rule can only leave a pod on the Node (`Skip`: what the pod's
//!   own `nodewright.io/drain` label can ask anyway), wait for a pod until the deadline
//!   (`WaitCompleted`: force mode still comes when the baseline says) or change the order:
//!   none makes force mode earlier or bypasses a PodDisruptionBudget.
//!
//! Every other value — shorter, zero, beyond a maximum, not a number, an unknown field, text
//! that is not a JSON object — is refused: the baseline's value is used and the refusal is
//! reported with what was asked and what was kept. A field the annotation leaves out keeps the
//! baseline's value without a word.

use std::fmt;
use std::time::Duration;

use super::local_data::LocalDataPolicy;
use super::purpose::DrainPurpose;
use crate::limits;
use crate::pool::DrainPolicy;

pub use crate::ownership::TAG_DRAIN;

/// The most refused fields a report names one by one; the rest are counted.
const MAX_REPORTED: usize = 8;

/// The longest value quoted in a report, in characters.
const MAX_ASKED_CHARS: usize = 40;

/// A duration field of the drain settings: its name in the annotation and the tag, its maximum,
/// and where it lives in [`DrainPolicy`].
pub(super) struct DurationField {
    pub(super) name: &'static str,
    pub(super) max: Duration,
    pub(super) of: fn(&mut DrainPolicy) -> &mut Duration,
}

/// The five duration fields, in the order the annotation and the tag write them: the one field
/// walk the annotation, the tag and the salvage of an old annotation share.
pub(super) const DURATIONS: [DurationField; 5] = [
    DurationField {
        name: "timeout",
        max: limits::MAX_DRAIN_TIMEOUT,
        of: |p| &mut p.timeout,
    },
    DurationField {
        name: "pdbRetryInterval",
        max: limits::MAX_PDB_RETRY_INTERVAL,
        of: |p| &mut p.pdb_retry_interval,
    },
    DurationField {
        name: "volumeDetachTimeout",
        max: limits::MAX_VOLUME_TIMEOUT,
        of: |p| &mut p.volume_detach_timeout,
    },
    DurationField {
        name: "volumeAttachTimeout",
        max: limits::MAX_VOLUME_TIMEOUT,
        of: |p| &mut p.volume_attach_timeout,
    },
    DurationField {
        name: "forceAfterUnhealthy",
        max: limits::MAX_FORCE_AFTER_UNHEALTHY,
        of: |p| &mut p.force_after_unhealthy,
    },
];

/// The name of the `localData` field.
const LOCAL_DATA: &str = "localData";

/// The drain rules' field in the annotation (never in the tag: it is too short for them).
const RULES: &str = "rules";

/// The hard deadline's field in the annotation and the tag.
pub(super) const HARD_DEADLINE_FIELD: &str = "terminationGracePeriod";

/// The longest hard deadline.
const MAX_HARD: Duration = limits::MAX_TERMINATION_GRACE_PERIOD;

/// The settings as the [`TAG_DRAIN`] tag holds them: whole seconds,
/// `timeout=7200,pdbRetryInterval=20,volumeDetachTimeout=120,volumeAttachTimeout=90,forceAfterUnhealthy=300`,
/// `,localData=evict|refuse` when set and `,terminationGracePeriod=172800` when set. At most
/// 160 characters, well within Azure's [`crate::ownership::MAX_TAG_VALUE_CHARS`].
pub fn policy_to_tag(policy: &DrainPolicy) -> String {
    let mut copy = policy.clone();
    let mut parts: Vec<String> = DURATIONS
        .iter()
        .map(|field| format!("{}={}", field.name, (field.of)(&mut copy).as_secs()))
        .collect();
    if let Some(local_data) = policy.local_data {
        parts.push(format!("{LOCAL_DATA}={}", local_data.as_str()));
    }
    if let Some(period) = policy.termination_grace_period {
        parts.push(format!("{HARD_DEADLINE_FIELD}={}", period.as_secs()));
    }
    parts.join(",")
}

/// Reads [`policy_to_tag`]'s text back: every duration field once, each more than zero and at
/// most its maximum, `localData` and `terminationGracePeriod` optional, nothing else.
///
/// # Errors
///
/// What is wrong, naming the tag and the field (the tag was edited by someone with write access
/// to the VM; the drain then uses the defaults and says so).
pub fn policy_from_tag(text: &str) -> Result<DrainPolicy, String> {
    let problem = |what: String| format!("tag {TAG_DRAIN} of the VM: {what}");
    let mut policy = DrainPolicy::default();
    let mut seen = [false; 5];
    for part in text.split(',') {
        let Some((name, value)) = part.split_once('=') else {
            return Err(problem(format!(
                "{} is not name=value",
                crate::text::quoted(&bounded(part))
            )));
        };
        if name == LOCAL_DATA {
            policy.local_data = Some(
                LocalDataPolicy::parse(value)
                    .ok_or_else(|| problem(format!("{LOCAL_DATA} is neither evict nor refuse")))?,
            );
            continue;
        }
        if name == HARD_DEADLINE_FIELD {
            let seconds = value
                .parse::<u64>()
                .ok()
                .filter(|&s| s > 0 && Duration::from_secs(s) <= MAX_HARD)
                .ok_or_else(|| {
                    problem(format!(
                        "{name} is not a whole number of seconds between 1s and the maximum {}",
                        limits::short(MAX_HARD)
                    ))
                })?;
            policy.termination_grace_period = Some(Duration::from_secs(seconds));
            continue;
        }
        let Some(index) = DURATIONS.iter().position(|field| field.name == name) else {
            return Err(problem(format!(
                "unknown field {}",
                crate::text::quoted(&bounded(name))
            )));
        };
        let field = &DURATIONS[index];
        let seconds = value
            .parse::<u64>()
            .map_err(|_| problem(format!("{name} is not a whole number of seconds")))?;
        let duration = Duration::from_secs(seconds);
        if seconds == 0 || duration > field.max {
            return Err(problem(format!(
                "{name} {seconds}s is not between 1s and the maximum {}",
                limits::short(field.max)
            )));
        }
        *(field.of)(&mut policy) = duration;
        seen[index] = true;
    }
    match DURATIONS.iter().zip(seen).find(|(_, seen)| !seen) {
        Some((missing, _)) => Err(problem(format!("{} is missing", missing.name))),
        None => Ok(policy),
    }
}

/// Why a field of the annotation was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// The text is not a JSON object: nothing of it is taken.
    NotAnObject,
    /// A duration shorter than the baseline's (zero included): earlier force mode or less
    /// patience.
    Shorter,
    /// A duration beyond the field's maximum ([`crate::limits`]).
    BeyondMaximum(Duration),
    /// Not a whole number of seconds.
    NotSeconds,
    /// `localData` that is neither `evict` nor `refuse`.
    NotLocalData,
    /// `localData` in the less careful direction for this drain's purpose.
    LessCareful(DrainPurpose),
    /// `rules` that are not drain rules as nodewright writes them, or too many.
    NotRules,
    /// `rules` when the trusted settings have their own: the pool's rules are used.
    RulesSet,
    /// `terminationGracePeriod` when the trusted settings have none: a hard deadline would let
    /// force mode override do-not-disrupt marks, which the pool did not ask for.
    NoHardDeadline,
    /// A field drain settings do not have.
    Unknown,
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefusalReason::NotAnObject => f.write_str("not a JSON object"),
            RefusalReason::Shorter => f.write_str(
                "shorter than the pool's: an annotation may only make a drain more patient",
            ),
            RefusalReason::BeyondMaximum(max) => {
                write!(f, "longer than the maximum {}", limits::short(*max))
            }
            RefusalReason::NotSeconds => f.write_str("not a whole number of seconds"),
            RefusalReason::NotLocalData => f.write_str("neither \"evict\" nor \"refuse\""),
            RefusalReason::LessCareful(DrainPurpose::Maintenance) => f.write_str(
                "a maintenance drain may only turn evict into refuse (the pods keep their data)",
            ),
            RefusalReason::LessCareful(DrainPurpose::Deletion) => f.write_str(
                "a deletion drain takes the pool's localData (refusing saves no data, the VM goes)",
            ),
            RefusalReason::NotRules => f.write_str("not drain rules as nodewright writes them"),
            RefusalReason::RulesSet => {
                f.write_str("the drain's own settings have rules: the annotation's are not used")
            }
            RefusalReason::NoHardDeadline => f.write_str(
                "the drain's own settings have no terminationGracePeriod: an annotation may not add a hard deadline",
            ),
            RefusalReason::Unknown => f.write_str("not a drain setting"),
        }
    }
}

/// One field of the annotation that was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedField {
    /// The field as the annotation names it (cut to 40 characters); `annotation` for text that
    /// is not a JSON object.
    pub field: String,
    /// What it asked for, as written (cut to 40 characters).
    pub asked: String,
    /// What the drain uses instead: the baseline's value.
    pub kept: String,
    /// Why.
    pub reason: RefusalReason,
}

impl fmt::Display for RefusedField {
    /// `timeout 1s refused (shorter than the pool's: ...): kept 7200s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} refused ({}): kept {}",
            self.field, self.asked, self.reason, self.kept
        )
    }
}

/// What [`bound_annotation`] made of an annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundedPolicy {
    /// The settings the drain uses: the baseline with the annotation's safe fields.
    pub policy: DrainPolicy,
    /// The fields taken from the annotation that differ from the baseline.
    pub taken: Vec<&'static str>,
    /// The fields not taken, with why (the first [`MAX_REPORTED`]).
    pub refused: Vec<RefusedField>,
    /// How many more fields were refused than `refused` names.
    pub more_refused: usize,
}

impl BoundedPolicy {
    /// Whether anything of the annotation was refused.
    pub fn has_refusals(&self) -> bool {
        !self.refused.is_empty()
    }

    /// The refused fields for people, `; `-separated, e.g. `timeout 1s refused (...): kept
    /// 7200s; forceAfterUnhealthy 1s refused (...): kept 300s`; empty when nothing was refused.
    pub fn refusals(&self) -> String {
        let mut said: Vec<String> = self.refused.iter().map(ToString::to_string).collect();
        if self.more_refused > 0 {
            said.push(format!("and {} more fields", self.more_refused));
        }
        said.join("; ")
    }

    fn refuse(&mut self, field: &str, asked: String, kept: String, reason: RefusalReason) {
        if self.refused.len() >= MAX_REPORTED {
            self.more_refused += 1;
            return;
        }
        self.refused.push(RefusedField {
            field: bounded(field),
            asked: bounded(&asked),
            kept,
            reason,
        });
    }
}

/// The drain settings from `baseline` (the trusted settings: request, VM tag or defaults) and
/// the Node's annotation `text`, taking of the annotation only what is safe for a drain of
/// `purpose` (see the module documentation); never panics, whatever the text.
pub fn bound_annotation(
    baseline: &DrainPolicy,
    purpose: DrainPurpose,
    text: &str,
) -> BoundedPolicy {
    let mut bounded_policy = BoundedPolicy {
        policy: baseline.clone(),
        taken: Vec::new(),
        refused: Vec::new(),
        more_refused: 0,
    };
    let object = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(object)) => object,
        _ => {
            bounded_policy.refuse(
                "annotation",
                crate::text::quoted(text),
                "the pool's settings".to_owned(),
                RefusalReason::NotAnObject,
            );
            return bounded_policy;
        }
    };
    for (name, value) in &object {
        if let Some(field) = DURATIONS.iter().find(|field| field.name == name) {
            let base = *(field.of)(&mut bounded_policy.policy);
            let kept = format!("{}s", base.as_secs());
            let Some(seconds) = value.as_u64() else {
                bounded_policy.refuse(name, value.to_string(), kept, RefusalReason::NotSeconds);
                continue;
            };
            let asked = Duration::from_secs(seconds);
            let verdict = if asked > field.max {
                Err(RefusalReason::BeyondMaximum(field.max))
            } else if asked < base {
                Err(RefusalReason::Shorter)
            } else {
                Ok(())
            };
            match verdict {
                Ok(()) => {
                    if asked > base {
                        *(field.of)(&mut bounded_policy.policy) = asked;
                        bounded_policy.taken.push(field.name);
                    }
                }
                Err(reason) => bounded_policy.refuse(name, format!("{seconds}s"), kept, reason),
            }
        } else if name == LOCAL_DATA {
            let current = LocalDataPolicy::or_default_for(baseline.local_data, purpose);
            let kept = current.as_str().to_owned();
            match value.as_str().and_then(LocalDataPolicy::parse) {
                None => bounded_policy.refuse(
                    name,
                    value.to_string(),
                    kept,
                    RefusalReason::NotLocalData,
                ),
                Some(asked) if asked == current => {}
                Some(LocalDataPolicy::Refuse) if purpose == DrainPurpose::Maintenance => {
                    bounded_policy.policy.local_data = Some(LocalDataPolicy::Refuse);
                    bounded_policy.taken.push(LOCAL_DATA);
                }
                Some(asked) => bounded_policy.refuse(
                    name,
                    asked.as_str().to_owned(),
                    kept,
                    RefusalReason::LessCareful(purpose),
                ),
            }
        } else if name == RULES {
            let kept = format!("{} rules", baseline.rules.len());
            match super::rules::read_rules(value) {
                Err(_) => {
                    bounded_policy.refuse(name, value.to_string(), kept, RefusalReason::NotRules);
                }
                Ok(asked) if asked == baseline.rules => {}
                Ok(_) if !baseline.rules.is_empty() => {
                    bounded_policy.refuse(name, value.to_string(), kept, RefusalReason::RulesSet)
                }
                Ok(asked) => {
                    bounded_policy.policy.rules = asked;
                    bounded_policy.taken.push(RULES);
                }
            }
        } else if name == HARD_DEADLINE_FIELD {
            bound_hard_deadline(&mut bounded_policy, baseline, value);
        } else {
            bounded_policy.refuse(
                name,
                value.to_string(),
                "nothing".to_owned(),
                RefusalReason::Unknown,
            );
        }
    }
    bounded_policy
}

/// Takes the annotation's `terminationGracePeriod` `value` when the baseline has a hard
/// deadline and the value is at least as late and within the maximum; refuses it otherwise.
fn bound_hard_deadline(
    bounded_policy: &mut BoundedPolicy,
    baseline: &DrainPolicy,
    value: &serde_json::Value,
) {
    let name = HARD_DEADLINE_FIELD;
    let Some(base) = baseline.termination_grace_period else {
        let kept = "none".to_owned();
        bounded_policy.refuse(name, value.to_string(), kept, RefusalReason::NoHardDeadline);
        return;
    };
    let kept = format!("{}s", base.as_secs());
    let Some(seconds) = value.as_u64() else {
        bounded_policy.refuse(name, value.to_string(), kept, RefusalReason::NotSeconds);
        return;
    };
    let asked = Duration::from_secs(seconds);
    if asked > MAX_HARD {
        let reason = RefusalReason::BeyondMaximum(MAX_HARD);
        bounded_policy.refuse(name, format!("{seconds}s"), kept, reason);
    } else if asked < base {
        bounded_policy.refuse(name, format!("{seconds}s"), kept, RefusalReason::Shorter);
    } else if asked > base {
        bounded_policy.policy.termination_grace_period = Some(asked);
        bounded_policy.taken.push(HARD_DEADLINE_FIELD);
    }
}

/// `text` with control characters as spaces, at most [`MAX_ASKED_CHARS`] characters (the last
/// one `…` when cut).
fn bounded(text: &str) -> String {
    let clean = |c: char| if c.is_control() { ' ' } else { c };
    if text.chars().count() <= MAX_ASKED_CHARS {
        return text.chars().map(clean).collect();
    }
    let mut cut: String = text.chars().take(MAX_ASKED_CHARS - 1).map(clean).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pool() -> DrainPolicy {
        DrainPolicy {
            timeout: Duration::from_secs(3600),
            pdb_retry_interval: Duration::from_secs(30),
            volume_detach_timeout: Duration::from_secs(120),
            volume_attach_timeout: Duration::from_secs(90),
            force_after_unhealthy: Duration::from_secs(600),
            local_data: None,
            rules: Vec::new(),
            termination_grace_period: None,
        }
    }

    fn secs(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn takes_only_the_safe_direction_field_by_field() {
        use DrainPurpose::{Deletion, Maintenance};
        // (purpose, annotation, expected settings, taken, refused as (field, reason))
        type Row = (
            DrainPurpose,
            &'static str,
            fn(&mut DrainPolicy),
            &'static [&'static str],
            &'static [(&'static str, RefusalReason)],
        );
        let table: &[Row] = &[
            // The annotation CreateMachine writes for this pool: nothing changes.
            (
                Maintenance,
                r#"{"timeout":3600,"pdbRetryInterval":30,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":600}"#,
                |_| {},
                &[],
                &[],
            ),
            (Maintenance, "{}", |_| {}, &[], &[]),
            // Immediate force mode is refused.
            (
                Deletion,
                r#"{"timeout":1,"forceAfterUnhealthy":1}"#,
                |_| {},
                &[],
                &[
                    ("forceAfterUnhealthy", RefusalReason::Shorter),
                    ("timeout", RefusalReason::Shorter),
                ],
            ),
            (
                Deletion,
                r#"{"timeout":0,"pdbRetryInterval":0}"#,
                |_| {},
                &[],
                &[
                    ("pdbRetryInterval", RefusalReason::Shorter),
                    ("timeout", RefusalReason::Shorter),
                ],
            ),
            // An enormous timeout is refused, not clamped.
            (
                Deletion,
                r#"{"timeout":1000000000000}"#,
                |_| {},
                &[],
                &[(
                    "timeout",
                    RefusalReason::BeyondMaximum(limits::MAX_DRAIN_TIMEOUT),
                )],
            ),
            (
                Deletion,
                r#"{"timeout":18446744073709551616}"#,
                |_| {},
                &[],
                &[("timeout", RefusalReason::NotSeconds)],
            ),
            // Longer, within the maxima: taken.
            (
                Maintenance,
                r#"{"timeout":86400,"pdbRetryInterval":600,"volumeDetachTimeout":3600,"volumeAttachTimeout":3600,"forceAfterUnhealthy":86400}"#,
                |p| {
                    p.timeout = limits::MAX_DRAIN_TIMEOUT;
                    p.pdb_retry_interval = limits::MAX_PDB_RETRY_INTERVAL;
                    p.volume_detach_timeout = limits::MAX_VOLUME_TIMEOUT;
                    p.volume_attach_timeout = limits::MAX_VOLUME_TIMEOUT;
                    p.force_after_unhealthy = limits::MAX_FORCE_AFTER_UNHEALTHY;
                },
                &[
                    "forceAfterUnhealthy",
                    "pdbRetryInterval",
                    "timeout",
                    "volumeAttachTimeout",
                    "volumeDetachTimeout",
                ],
                &[],
            ),
            // One beyond its maximum: the others are still taken.
            (
                Maintenance,
                r#"{"timeout":7200,"pdbRetryInterval":601,"volumeDetachTimeout":3601}"#,
                |p| p.timeout = secs(7200),
                &["timeout"],
                &[
                    (
                        "pdbRetryInterval",
                        RefusalReason::BeyondMaximum(limits::MAX_PDB_RETRY_INTERVAL),
                    ),
                    (
                        "volumeDetachTimeout",
                        RefusalReason::BeyondMaximum(limits::MAX_VOLUME_TIMEOUT),
                    ),
                ],
            ),
            (
                Maintenance,
                r#"{"timeout":"2h","volumeAttachTimeout":-1,"colour":"red"}"#,
                |_| {},
                &[],
                &[
                    ("colour", RefusalReason::Unknown),
                    ("timeout", RefusalReason::NotSeconds),
                    ("volumeAttachTimeout", RefusalReason::NotSeconds),
                ],
            ),
            // localData: maintenance may only turn to refuse; a deletion keeps the pool's.
            (Maintenance, r#"{"localData":"refuse"}"#, |_| {}, &[], &[]),
            (
                Maintenance,
                r#"{"localData":"evict"}"#,
                |_| {},
                &[],
                &[(
                    "localData",
                    RefusalReason::LessCareful(DrainPurpose::Maintenance),
                )],
            ),
            (
                Deletion,
                r#"{"localData":"refuse"}"#,
                |_| {},
                &[],
                &[(
                    "localData",
                    RefusalReason::LessCareful(DrainPurpose::Deletion),
                )],
            ),
            (Deletion, r#"{"localData":"evict"}"#, |_| {}, &[], &[]),
            (
                Deletion,
                r#"{"localData":"keep"}"#,
                |_| {},
                &[],
                &[("localData", RefusalReason::NotLocalData)],
            ),
            // Not an object: nothing taken.
            (
                Deletion,
                "2h",
                |_| {},
                &[],
                &[("annotation", RefusalReason::NotAnObject)],
            ),
            (
                Deletion,
                "",
                |_| {},
                &[],
                &[("annotation", RefusalReason::NotAnObject)],
            ),
            (
                Deletion,
                "[1]",
                |_| {},
                &[],
                &[("annotation", RefusalReason::NotAnObject)],
            ),
        ];
        for (purpose, text, change, taken, refused) in table {
            let mut expected = pool();
            change(&mut expected);
            let bounded = bound_annotation(&pool(), *purpose, text);
            assert_eq!(bounded.policy, expected, "{text}");
            let mut got_taken = bounded.taken.clone();
            got_taken.sort_unstable();
            assert_eq!(&got_taken, taken, "{text}");
            let got: Vec<(&str, RefusalReason)> = bounded
                .refused
                .iter()
                .map(|r| (r.field.as_str(), r.reason))
                .collect();
            assert_eq!(&got, refused, "{text}");
            assert_eq!(bounded.has_refusals(), !refused.is_empty(), "{text}");
        }
    }

    #[test]
    fn a_maintenance_drain_of_an_evicting_pool_may_turn_to_refuse() {
        let evicting = DrainPolicy {
            local_data: Some(LocalDataPolicy::Evict),
            ..pool()
        };
        let bounded = bound_annotation(
            &evicting,
            DrainPurpose::Maintenance,
            r#"{"localData":"refuse"}"#,
        );
        assert_eq!(bounded.policy.local_data, Some(LocalDataPolicy::Refuse));
        assert_eq!(bounded.taken, ["localData"]);
        let bounded = bound_annotation(
            &evicting,
            DrainPurpose::Deletion,
            r#"{"localData":"refuse"}"#,
        );
        assert_eq!(bounded.policy.local_data, Some(LocalDataPolicy::Evict));
        assert_eq!(bounded.refused.len(), 1);
    }

    #[test]
    fn a_hard_deadline_may_only_come_later_and_never_be_added() {
        let with_hard = DrainPolicy {
            termination_grace_period: Some(secs(3600)),
            ..pool()
        };
        // (baseline, annotation, expected period, refusal)
        let cases = [
            (
                &with_hard,
                r#"{"terminationGracePeriod":7200}"#,
                Some(7200),
                None,
            ),
            (
                &with_hard,
                r#"{"terminationGracePeriod":3600}"#,
                Some(3600),
                None,
            ),
            (
                &with_hard,
                r#"{"terminationGracePeriod":60}"#,
                Some(3600),
                Some(RefusalReason::Shorter),
            ),
            (
                &with_hard,
                r#"{"terminationGracePeriod":604801}"#,
                Some(3600),
                Some(RefusalReason::BeyondMaximum(MAX_HARD)),
            ),
            (
                &with_hard,
                r#"{"terminationGracePeriod":"1h"}"#,
                Some(3600),
                Some(RefusalReason::NotSeconds),
            ),
            (
                &pool(),
                r#"{"terminationGracePeriod":7200}"#,
                None,
                Some(RefusalReason::NoHardDeadline),
            ),
        ];
        for (baseline, text, period, refusal) in cases {
            let bounded = bound_annotation(baseline, DrainPurpose::Deletion, text);
            assert_eq!(
                bounded.policy.termination_grace_period,
                period.map(secs),
                "{text}"
            );
            assert_eq!(bounded.refused.first().map(|r| r.reason), refusal, "{text}");
        }
    }

    #[test]
    fn reports_say_what_was_asked_and_what_was_kept() {
        let bounded = bound_annotation(
            &pool(),
            DrainPurpose::Deletion,
            r#"{"timeout":1,"forceAfterUnhealthy":1000000000000}"#,
        );
        assert_eq!(
            bounded.refusals(),
            "forceAfterUnhealthy 1000000000000s refused (longer than the maximum 24h): kept 600s; \
             timeout 1s refused (shorter than the pool's: an annotation may only make a drain more patient): kept 3600s"
        );
        let bounded = bound_annotation(&pool(), DrainPurpose::Deletion, "not json at all");
        assert_eq!(
            bounded.refusals(),
            "annotation \"not json at all\" refused (not a JSON object): kept the pool's settings"
        );
        let many: String = (0..20).map(|i| format!("\"f{i}\":1,")).collect();
        let bounded = bound_annotation(
            &pool(),
            DrainPurpose::Deletion,
            &format!("{{{}}}", many.trim_end_matches(',')),
        );
        assert_eq!(bounded.refused.len(), MAX_REPORTED);
        assert_eq!(bounded.more_refused, 12);
        assert!(bounded.refusals().ends_with("; and 12 more fields"));
        let long = format!("{{\"{}\":1}}", "x".repeat(10_000));
        let bounded = bound_annotation(&pool(), DrainPurpose::Deletion, &long);
        assert_eq!(bounded.refused[0].field.chars().count(), MAX_ASKED_CHARS);
    }

    #[test]
    fn the_tag_carries_the_settings_and_refuses_anything_else() {
        let policy = DrainPolicy::default();
        let tag = policy_to_tag(&policy);
        assert_eq!(
            tag,
            "timeout=7200,pdbRetryInterval=20,volumeDetachTimeout=120,volumeAttachTimeout=90,forceAfterUnhealthy=300"
        );
        assert_eq!(policy_from_tag(&tag), Ok(policy));
        let longest = DrainPolicy {
            timeout: limits::MAX_DRAIN_TIMEOUT,
            pdb_retry_interval: limits::MAX_PDB_RETRY_INTERVAL,
            volume_detach_timeout: limits::MAX_VOLUME_TIMEOUT,
            volume_attach_timeout: limits::MAX_VOLUME_TIMEOUT,
            force_after_unhealthy: limits::MAX_FORCE_AFTER_UNHEALTHY,
            local_data: Some(LocalDataPolicy::Refuse),
            rules: Vec::new(),
            termination_grace_period: Some(limits::MAX_TERMINATION_GRACE_PERIOD),
        };
        let tag = policy_to_tag(&longest);
        assert!(tag.len() <= 160, "{tag}");
        assert!(tag.chars().count() <= crate::ownership::MAX_TAG_VALUE_CHARS);
        assert_eq!(policy_from_tag(&tag), Ok(longest));
        for (text, problem) in [
            ("", "\"\" is not name=value"),
            ("timeout=7200", "pdbRetryInterval is missing"),
            (
                "timeout=0,pdbRetryInterval=20",
                "timeout 0s is not between 1s and the maximum 24h",
            ),
            (
                "timeout=86401",
                "timeout 86401s is not between 1s and the maximum 24h",
            ),
            ("timeout=2h", "timeout is not a whole number of seconds"),
            ("colour=red", "unknown field \"colour\""),
            ("localData=keep", "localData is neither evict nor refuse"),
        ] {
            assert_eq!(
                policy_from_tag(text),
                Err(format!("tag nodewright.io-drain of the VM: {problem}")),
                "{text}"
            );
        }
    }

    fn policy_within_bounds() -> impl Strategy<Value = DrainPolicy> {
        (
            1u64..=86_400,
            1u64..=600,
            1u64..=3600,
            1u64..=3600,
            1u64..=86_400,
            proptest::option::of(prop_oneof![
                Just(LocalDataPolicy::Evict),
                Just(LocalDataPolicy::Refuse),
            ]),
            proptest::option::of(1u64..=604_800),
        )
            .prop_map(|(t, p, d, a, f, local_data, hard)| DrainPolicy {
                timeout: secs(t),
                pdb_retry_interval: secs(p),
                volume_detach_timeout: secs(d),
                volume_attach_timeout: secs(a),
                force_after_unhealthy: secs(f),
                local_data,
                rules: Vec::new(),
                termination_grace_period: hard.map(secs),
            })
    }

    fn purpose() -> impl Strategy<Value = DrainPurpose> {
        prop_oneof![
            Just(DrainPurpose::Maintenance),
            Just(DrainPurpose::Deletion)
        ]
    }

    /// The bound every result keeps: each duration between the baseline's and its maximum,
    /// and local data never less careful than the baseline's.
    fn within(baseline: &DrainPolicy, purpose: DrainPurpose, got: &DrainPolicy) -> bool {
        let mut base = baseline.clone();
        let mut got = got.clone();
        let durations_ok = DURATIONS.iter().all(|field| {
            let (b, g) = (*(field.of)(&mut base), *(field.of)(&mut got));
            b <= g && g <= field.max
        });
        let was = LocalDataPolicy::or_default_for(baseline.local_data, purpose);
        let now = LocalDataPolicy::or_default_for(got.local_data, purpose);
        let local_ok = match purpose {
            DrainPurpose::Maintenance => now == was || now == LocalDataPolicy::Refuse,
            DrainPurpose::Deletion => now == was,
        };
        let hard_ok = match (
            baseline.termination_grace_period,
            got.termination_grace_period,
        ) {
            (None, None) => true,
            (Some(b), Some(g)) => b <= g && g <= MAX_HARD,
            _ => false,
        };
        durations_ok && local_ok && hard_ok
    }

    proptest! {
        #[test]
        fn any_text_stays_within_the_baseline_and_the_maxima(
            baseline in policy_within_bounds(),
            purpose in purpose(),
            text in ".*",
        ) {
            let bounded = bound_annotation(&baseline, purpose, &text);
            prop_assert!(within(&baseline, purpose, &bounded.policy));
        }

        #[test]
        fn any_numbers_are_taken_exactly_when_safe(
            baseline in policy_within_bounds(),
            purpose in purpose(),
            asked in proptest::array::uniform5(prop_oneof![
                Just(0u64),
                1u64..=90_000,
                any::<u64>(),
            ]),
            local_data in proptest::option::of(prop_oneof![Just("evict"), Just("refuse")]),
        ) {
            let mut text = DURATIONS
                .iter()
                .zip(asked)
                .map(|(field, seconds)| format!("\"{}\":{seconds}", field.name))
                .collect::<Vec<_>>()
                .join(",");
            if let Some(local_data) = local_data {
                text.push_str(&format!(",\"localData\":\"{local_data}\""));
            }
            let bounded = bound_annotation(&baseline, purpose, &format!("{{{text}}}"));
            prop_assert!(within(&baseline, purpose, &bounded.policy));
            let mut base = baseline.clone();
            let mut got = bounded.policy.clone();
            for (field, seconds) in DURATIONS.iter().zip(asked) {
                let safe = secs(seconds) >= *(field.of)(&mut base) && secs(seconds) <= field.max;
                let refused = bounded.refused.iter().any(|r| r.field == field.name);
                prop_assert_eq!(refused, !safe, "{}", field.name);
                if safe {
                    prop_assert_eq!(*(field.of)(&mut got), secs(seconds));
                } else {
                    prop_assert_eq!(*(field.of)(&mut got), *(field.of)(&mut base));
                }
            }
        }

        #[test]
        fn a_tag_survives_its_reading(baseline in policy_within_bounds()) {
            prop_assert_eq!(policy_from_tag(&policy_to_tag(&baseline)), Ok(baseline));
        }

        #[test]
        fn the_annotation_of_the_baseline_changes_nothing(
            baseline in policy_within_bounds(),
            purpose in purpose(),
        ) {
            let text = super::super::policy_to_annotation(&baseline);
            let bounded = bound_annotation(&baseline, purpose, &text);
            prop_assert_eq!(&bounded.policy, &baseline);
            prop_assert!(!bounded.has_refusals());
        }
    }
}
