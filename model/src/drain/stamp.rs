//! Which fields of a Node's [`super::ANNOTATION_DRAIN_POLICY`] annotation are an operator's edit,
//! and which are only what nodewright itself wrote there.
//!
//! nodewright writes the pool's drain settings into the annotation when it creates a machine (and
//! again when a rollout changes only the drain settings), and the exact text it wrote into a
//! second annotation, [`ANNOTATION_DRAIN_POLICY_STAMP`]. A top-level field of the annotation whose
//! JSON value equals the stamp's is nodewright's own: it says what the pool said then, not what
//! anyone wishes now, so it yields to the drain's trusted settings (a rollout's request, the VM's
//! tag). A field that differs from the stamp, or that the stamp lacks, is an operator's edit: a
//! wish, bounded as every wish is ([`super::bound_annotation`]).
//!
//! Without a stamp (a Node made before it), the record is the VM's [`super::TAG_DRAIN`] tag,
//! written by the same create: its durations, `localData` and `terminationGracePeriod` tell the
//! create's fields, and the annotation's `rules` count as the create's. Without either, the
//! whole annotation is a wish, as it was before the stamp.
//!
//! `rules` are special: with a request that carries settings the stamped rules are superseded
//! (the request has the pool's rules, or none); without one (a maintenance drain) they stay,
//! since the annotation is how the pool's rules reach a drain that has no pool file.
//!
//! Forging or removing the stamp is harmless: it can only turn a wish into nodewright's own
//! field (the trusted settings are used) or back into a wish (bounded as before).

use serde_json::{Map, Value};

use super::request::policy_to_annotation;
use crate::pool::DrainPolicy;

/// The Node annotation holding the exact text nodewright last wrote into
/// [`super::ANNOTATION_DRAIN_POLICY`].
pub const ANNOTATION_DRAIN_POLICY_STAMP: &str = "nodewright.io/drain-policy-stamp";

/// The drain rules' field of the annotation.
const RULES: &str = "rules";

/// What tells nodewright's own fields of the annotation from an operator's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StampRecord<'a> {
    /// The Node's [`ANNOTATION_DRAIN_POLICY_STAMP`].
    Stamp(&'a str),
    /// No stamp: the settings the VM's tag holds (written by the same create).
    Tag(DrainPolicy),
    /// Neither: every field is a wish.
    None,
}

impl<'a> StampRecord<'a> {
    /// The record of a Node whose stamp is `stamp` and whose VM's tag reads `tag`: the stamp,
    /// else the tag when it reads, else none.
    pub fn of(stamp: Option<&'a str>, tag: Option<&str>) -> Self {
        match (stamp, tag.map(super::annotation::policy_from_tag)) {
            (Some(stamp), _) => StampRecord::Stamp(stamp),
            (None, Some(Ok(policy))) => StampRecord::Tag(policy),
            (None, _) => StampRecord::None,
        }
    }
}

/// What of the annotation is an operator's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wishes {
    /// The operator's fields as a JSON object, or the whole text when it is not a JSON object
    /// (so that it is refused and reported); `None` when every field is nodewright's.
    pub text: Option<String>,
    /// The fields that are nodewright's own and were left out.
    pub own: Vec<String>,
}

/// The operator's part of the Node's drain-policy `annotation`, told from nodewright's own
/// fields by `record`; `request_has_settings` says whether the drain's request carries settings
/// (then stamped `rules` are superseded too).
pub fn operator_wishes(
    annotation: &str,
    record: &StampRecord<'_>,
    request_has_settings: bool,
) -> Wishes {
    let whole = || Wishes {
        text: Some(annotation.to_owned()),
        own: Vec::new(),
    };
    let Some(fields) = object(annotation) else {
        return whole();
    };
    let (recorded, rules_are_own) = match record {
        StampRecord::Stamp(stamp) => match object(stamp) {
            Some(recorded) => (recorded, false),
            // A stamp that does not read records nothing.
            None => return whole(),
        },
        StampRecord::Tag(policy) => match object(&policy_to_annotation(policy)) {
            Some(recorded) => (recorded, true),
            None => return whole(),
        },
        StampRecord::None => return whole(),
    };
    let mut wished = Map::new();
    let mut own = Vec::new();
    for (name, value) in fields {
        let is_own = if name == RULES {
            let stamped = rules_are_own || recorded.get(RULES) == Some(&value);
            stamped && request_has_settings
        } else {
            recorded.get(&name) == Some(&value)
        };
        if is_own {
            own.push(name);
        } else {
            wished.insert(name, value);
        }
    }
    Wishes {
        text: (!wished.is_empty()).then(|| Value::Object(wished).to_string()),
        own,
    }
}

/// The annotations a restamp writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restamped {
    /// The new [`super::ANNOTATION_DRAIN_POLICY`]: the new settings with the operator's fields
    /// over them.
    pub annotation: String,
    /// The new [`ANNOTATION_DRAIN_POLICY_STAMP`]: the new settings exactly.
    pub stamp: String,
    /// The operator's fields kept, by name.
    pub kept: Vec<String>,
}

/// The annotations that put the `new` settings on a Node whose annotation is `annotation` (when
/// it has one), keeping the operator's fields as `record` tells them. Applying it twice changes
/// nothing the second time.
pub fn restamp(annotation: Option<&str>, record: &StampRecord<'_>, new: &DrainPolicy) -> Restamped {
    let stamp = policy_to_annotation(new);
    let wishes = annotation
        // Stamped rules are nodewright's here: the new settings bring their own.
        .map(|text| operator_wishes(text, record, true))
        .unwrap_or_default();
    let wished = wishes.text.as_deref().and_then(object);
    let (Some(wished), Some(mut merged)) = (wished, object(&stamp)) else {
        // Nothing of the operator's, or an annotation that is not a JSON object (it is
        // replaced: nothing of it could be taken).
        return Restamped {
            annotation: stamp.clone(),
            stamp,
            kept: Vec::new(),
        };
    };
    let mut kept = Vec::new();
    for (name, value) in wished {
        if merged.get(&name) != Some(&value) {
            kept.push(name.clone());
            merged.insert(name, value);
        }
    }
    Restamped {
        annotation: Value::Object(merged).to_string(),
        stamp,
        kept,
    }
}

/// The digest a rollout compares a Node's stamp or a VM's tag with (16 hex digits).
pub fn stamp_digest(text: &str) -> String {
    crate::listing::digest(&[text])
}

fn object(text: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(fields)) => Some(fields),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
