//! Which drain settings a drain uses: the one precedence of every source.
//!
//! Highest first:
//!
//! 1. a **resumed** run (continued as new) keeps the settings its first run chose, whatever else
//!    says, and reports nothing again;
//! 2. the request's `localData` (`machine drain --local-data`) wins over every other `localData`;
//! 3. the **trusted** settings: the request's (`machine drain` flags, a rollout's pool file),
//!    else the VM's [`super::TAG_DRAIN`] tag, else the defaults;
//! 4. the Node's [`super::ANNOTATION_DRAIN_POLICY`] annotation, taken only where it makes the
//!    drain more patient or more careful than the trusted settings ([`super::bound_annotation`]).
//!
//! Runs recorded before the annotation was bounded ([`AnnotationTrust::PerField`],
//! [`AnnotationTrust::Whole`]) trusted the annotation below the request's settings: whole when it
//! read, field by field ([`super::salvage_policy`]) or not at all when it did not.

use super::ANNOTATION_DRAIN_POLICY;
use super::annotation::{TAG_DRAIN, bound_annotation, policy_from_tag};
use super::local_data::LocalDataPolicy;
use super::purpose::DrainPurpose;
use super::request::{policy_from_annotation, salvage_policy};
use super::stamp::{StampRecord, operator_wishes};
use crate::pool::DrainPolicy;

/// What reading the VM's [`TAG_DRAIN`] tag gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagRead {
    /// The tag's value.
    Tagged(String),
    /// The VM has no such tag: it was created before it.
    Untagged,
    /// No VM of this cluster's machine (absent, or not ours).
    NoVm,
    /// The read failed, for this reason (for people).
    Failed(String),
}

/// How far a run trusts the Node's annotation: the patch markers it was recorded under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnnotationTrust {
    /// Bounded by the trusted settings (marker `drain-annotation-bounded`); the VM's tag as read,
    /// `None` when the request carries settings (the tag is then not read).
    Bounded(Option<TagRead>),
    /// Before the bounds: an annotation that does not read is salvaged field by field (marker
    /// `drain-annotation-per-field`).
    PerField,
    /// Before both markers: an annotation that does not read gives all defaults.
    Whole,
}

/// Every source of a drain's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsSources<'a> {
    /// The Node drained (named in the annotation's refusal).
    pub node: &'a str,
    /// Why it is drained.
    pub purpose: DrainPurpose,
    /// The settings a resumed run carries ([`super::DrainResume::policy`]).
    pub resumed: Option<&'a DrainPolicy>,
    /// The request's settings.
    pub request: Option<&'a DrainPolicy>,
    /// The request's `localData`.
    pub request_local_data: Option<LocalDataPolicy>,
    /// The Node's annotation, as written.
    pub annotation: Option<&'a str>,
    /// How far the annotation is trusted.
    pub trust: AnnotationTrust,
    /// The Node's [`super::ANNOTATION_DRAIN_POLICY_STAMP`], when it has one.
    pub stamp: Option<&'a str>,
    /// Whether the annotation's fields nodewright wrote itself are told from an operator's
    /// (marker `drain-annotation-own-fields`; see [`super::operator_wishes`]): only those are
    /// wishes. Runs recorded before it take every field as a wish.
    pub own_fields: bool,
}

/// The settings a drain uses, and what to say about them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainSettings {
    /// The settings.
    pub policy: DrainPolicy,
    /// Where they came from, for people (e.g. `the pool, VM tag nodewright.io-drain`).
    pub source: String,
    /// The `drainSettings` fact: the settings and where they came from.
    pub fact: String,
    /// Warnings for the status (a tag that does not read, a refused annotation...).
    pub warnings: Vec<String>,
    /// The note of the Node Event that reports a refused annotation, when one was refused.
    pub refused_note: Option<String>,
}

/// Whether a run recorded before the bounds asks whether it salvages the annotation: only when
/// the request has no settings and the annotation does not read (the only case the answer
/// changes).
pub fn asks_salvage(request: Option<&DrainPolicy>, annotation: Option<&str>) -> bool {
    request.is_none() && annotation.is_some_and(|text| policy_from_annotation(text).is_err())
}

/// The settings a drain uses, from every source in the order of the module documentation.
pub fn drain_settings(sources: &SettingsSources<'_>) -> DrainSettings {
    let mut warnings = Vec::new();
    let mut refused_note = None;
    let (mut chosen, source) = match &sources.trust {
        AnnotationTrust::Bounded(tag) => {
            let (baseline, source, warning) = trusted(sources.request, tag.as_ref());
            warnings.extend(warning);
            let (wished, stamped) = match sources.annotation {
                Some(text) if sources.own_fields => {
                    let record = stamp_record(sources.stamp, tag.as_ref());
                    let wishes = operator_wishes(text, &record, sources.request.is_some());
                    (wishes.text, !wishes.own.is_empty())
                }
                other => (other.map(str::to_owned), false),
            };
            let source = if stamped {
                format!("{source}; the Node's annotation is the pool's stamp")
            } else {
                source
            };
            match wished.as_deref() {
                Some(text) => {
                    let bounded = bound_annotation(&baseline, sources.purpose, text);
                    if bounded.has_refusals() {
                        let note = format!(
                            "annotation {ANNOTATION_DRAIN_POLICY} of Node {} asks for what the drain settings from {source} do not allow (it may only make the drain more patient or more careful, within the maxima): {}",
                            sources.node,
                            bounded.refusals()
                        );
                        warnings.push(note.clone());
                        refused_note = Some(note);
                    }
                    let source = if bounded.taken.is_empty() {
                        source
                    } else {
                        format!(
                            "{source}, made more patient by the Node's annotation: {}",
                            bounded.taken.join(", ")
                        )
                    };
                    (bounded.policy, source)
                }
                None => (baseline, source),
            }
        }
        AnnotationTrust::PerField | AnnotationTrust::Whole => {
            let salvage = sources.trust == AnnotationTrust::PerField;
            let (policy, source, warning) =
                before_bounds(sources.request, sources.annotation, salvage);
            warnings.extend(warning);
            (policy, source.to_owned())
        }
    };
    chosen.local_data = sources.request_local_data.or(chosen.local_data);
    let policy = match sources.resumed {
        Some(resumed) => {
            warnings.clear();
            refused_note = None;
            resumed.clone()
        }
        None => chosen,
    };
    let fact = format!(
        "{} (from {source})",
        describe_policy(&policy, sources.purpose)
    );
    DrainSettings {
        policy,
        source,
        fact,
        warnings,
        refused_note,
    }
}

/// The settings for people, e.g. `timeout 7200s, PDB retry 20s, detach 120s, reattach 90s,
/// force after 300s unhealthy, local data refuse (the purpose's default)`, and `, hard deadline
/// 172800s` when the settings have one.
pub fn describe_policy(policy: &DrainPolicy, purpose: DrainPurpose) -> String {
    let local_data = LocalDataPolicy::or_default_for(policy.local_data, purpose).as_str();
    let hard = policy
        .termination_grace_period
        .map(|period| format!(", hard deadline {}s", period.as_secs()))
        .unwrap_or_default();
    format!(
        "timeout {}s, PDB retry {}s, detach {}s, reattach {}s, force after {}s unhealthy, local data {local_data}{}{hard}",
        policy.timeout.as_secs(),
        policy.pdb_retry_interval.as_secs(),
        policy.volume_detach_timeout.as_secs(),
        policy.volume_attach_timeout.as_secs(),
        policy.force_after_unhealthy.as_secs(),
        if policy.local_data.is_none() {
            " (the purpose's default)"
        } else {
            ""
        }
    )
}

/// What tells nodewright's own fields of the annotation: the stamp, else the VM's tag when it
/// was read and reads, else nothing.
fn stamp_record<'a>(stamp: Option<&'a str>, tag: Option<&TagRead>) -> StampRecord<'a> {
    let tagged = match tag {
        Some(TagRead::Tagged(value)) => Some(value.as_str()),
        _ => None,
    };
    StampRecord::of(stamp, tagged)
}

/// The trusted settings: the request's, else the tag's, else the defaults; where they came
/// from; and a warning when the tag could not be used.
fn trusted(
    request: Option<&DrainPolicy>,
    tag: Option<&TagRead>,
) -> (DrainPolicy, String, Option<String>) {
    if let Some(policy) = request {
        return (policy.clone(), "the request".to_owned(), None);
    }
    let defaults =
        |source: String, warning: Option<String>| (DrainPolicy::default(), source, warning);
    match tag {
        Some(TagRead::Tagged(value)) => match policy_from_tag(value) {
            Ok(policy) => (policy, format!("the pool, VM tag {TAG_DRAIN}"), None),
            Err(problem) => defaults(
                "defaults".to_owned(),
                Some(format!(
                    "{problem}; the drain's trusted settings are the defaults (fix or remove the tag)"
                )),
            ),
        },
        Some(TagRead::Untagged) => defaults(
            format!("defaults: the VM has no tag {TAG_DRAIN}, it was created before it"),
            None,
        ),
        Some(TagRead::NoVm) => defaults(
            format!("defaults: no VM of this cluster's machine to read the tag {TAG_DRAIN} of"),
            None,
        ),
        Some(TagRead::Failed(reason)) => defaults(
            "defaults".to_owned(),
            Some(format!(
                "reading the VM's tag {TAG_DRAIN} failed ({reason}): the drain's trusted settings are the defaults"
            )),
        ),
        // Not read although the request has no settings: nothing trusted but the defaults.
        None => defaults("defaults".to_owned(), None),
    }
}

/// The settings of a run recorded before the bounds: the request's, else the annotation's
/// (salvaged field by field when `salvage`), else the defaults; and the warning for an
/// annotation that was not read.
fn before_bounds(
    request: Option<&DrainPolicy>,
    annotation: Option<&str>,
    salvage: bool,
) -> (DrainPolicy, &'static str, Option<String>) {
    match (request, annotation) {
        (Some(policy), _) => (policy.clone(), "request", None),
        (None, None) => (DrainPolicy::default(), "defaults", None),
        (None, Some(text)) => match policy_from_annotation(text) {
            Ok(policy) => (policy, "the Node's pool", None),
            Err(_) if salvage => {
                let (policy, problems) = salvage_policy(text);
                let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
                let warning = format!(
                    "{}; drained with the pool's other settings from the annotation and the default for those",
                    said.join("; ")
                );
                (policy, "the Node's pool, partly defaults", Some(warning))
            }
            Err(bad) => (
                DrainPolicy::default(),
                "defaults",
                Some(format!("{bad}; drained with the default settings instead")),
            ),
        },
    }
}

#[cfg(test)]
mod tests;
