//! The input and result of DrainNode, and the drain settings a Node carries.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::annotation::HARD_DEADLINE_FIELD;
use super::entries::{PodProgress, VolumeProgress};
use super::local_data::{LocalDataPod, LocalDataPolicy};
use super::pods::VolumePod;
use super::purpose::DrainPurpose;
use crate::ClusterName;
use crate::limits;
use crate::pool::DrainPolicy;

/// The input of DrainNode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainRequest {
    /// The cluster that owns the machine.
    pub cluster: ClusterName,
    /// The Node (= machine) to drain.
    pub node: String,
    /// Why.
    pub purpose: DrainPurpose,
    /// Settings to use instead of the ones the Node carries (its pool's), e.g. from CLI flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<DrainPolicy>,
    /// Start in force mode (`--force`).
    #[serde(default)]
    pub force: bool,
    /// What to do with pods whose eviction loses data, instead of the settings' (`machine drain
    /// --local-data`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_data: Option<LocalDataPolicy>,
    /// Set when a long drain continued as a new run: where the previous run left off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<DrainResume>,
    /// Why the machine is drained: an operator's request (the default) or nodewright's own
    /// choice. A voluntary drain does not evict pods marked do-not-disrupt: it waits for them
    /// until force mode overrides the marks (see [`super::overrides_marks`]); any other drain
    /// evicts them and names them in its status and result.
    #[serde(
        default,
        skip_serializing_if = "crate::disruption::Disruption::is_operator"
    )]
    pub disruption: crate::disruption::Disruption,
    /// History events after which the drain continues as a new run (a hidden test knob, `machine
    /// drain --history-limit`, between [`super::MIN_DRAIN_HISTORY_LIMIT`] and
    /// [`limits::MAX_HISTORY_LIMIT`]); without one, when Temporal suggests it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_limit: Option<u32>,
}

/// What a drain carries into its next run when it continues as new (its history grew long
/// while a PodDisruptionBudget or a stuck volume kept it waiting).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainResume {
    /// When the drain started, RFC 3339.
    pub started_at: String,
    /// The deadline (extensions included), RFC 3339.
    pub deadline: String,
    /// Whether force was requested.
    pub force_requested: bool,
    /// The settings in use.
    pub policy: DrainPolicy,
    /// What the drain did so far.
    pub done_so_far: DrainedNode,
    /// Which run of the drain this is (1 for the first continuation).
    pub continuation: u32,
    /// The pods whose volumes did not detach in time: the next run looks at them again until
    /// they detach or force mode is due (older inputs carry none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stuck_volumes: Vec<VolumePod>,
    /// The status's pods as this run left them (states, evictions asked, details), shown again
    /// by the next run until it looks at them itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodProgress>,
    /// The status's volumes as this run left them (a stuck one stays `detach-timed-out`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeProgress>,
}

/// What DrainNode returns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainedNode {
    /// The Node.
    pub node: String,
    /// False when there was no Node of ours to drain.
    pub node_found: bool,
    /// Pods evicted (namespace/name).
    pub evicted: Vec<String>,
    /// Pods deleted with grace period 0 in force mode.
    pub force_deleted: Vec<String>,
    /// The pods of `evicted` and `force_deleted` whose data went with them (`emptyDir` volumes,
    /// no controller), with what each lost.
    #[serde(default)]
    pub local_data_lost: Vec<LocalDataPod>,
    /// Persistent volumes that moved to another node (PV name → new node).
    pub volumes_moved: Vec<(String, String)>,
    /// Set when the drain ended in force mode, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced: Option<String>,
    /// Things that went wrong without failing the drain (e.g. a reattach timeout).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Whether the Node was cordoned before the drain began, by someone else: a cancelled drain
    /// (or a delete cancelled after its drain) leaves it cordoned.
    #[serde(default)]
    pub cordoned_before: bool,
    /// Pods marked do-not-disrupt that the drain evicted or deleted anyway, each with its
    /// annotation and why, e.g. `shop/db-0 (nodewright.io/do-not-disrupt): deleted with grace
    /// period 0, terminationGracePeriod 2h passed (the drain's hard deadline)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overridden: Vec<String>,
}

impl DrainedNode {
    /// Names a do-not-disrupt mark the drain went past (once).
    pub fn note_overridden(&mut self, text: &str) {
        if !self.overridden.iter().any(|known| known == text) {
            self.overridden.push(text.to_owned());
        }
    }

    /// Records that `pod` was evicted or force-deleted with its local data (once per pod).
    pub fn note_local_data_lost(&mut self, pod: &LocalDataPod) {
        if !self.local_data_lost.iter().any(|p| p.pod == pod.pod) {
            self.local_data_lost.push(pod.clone());
        }
    }
}

impl Default for DrainPolicy {
    /// machine-controller-manager's defaults: drain timeout 2h, PDB retry 20s, detach 2m,
    /// reattach 90s, force after 5m unhealthy.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(2 * 3600),
            pdb_retry_interval: Duration::from_secs(20),
            volume_detach_timeout: Duration::from_secs(120),
            volume_attach_timeout: Duration::from_secs(90),
            force_after_unhealthy: Duration::from_secs(300),
            local_data: None,
            rules: Vec::new(),
            termination_grace_period: None,
        }
    }
}

/// The drain settings as the Node annotation [`super::ANNOTATION_DRAIN_POLICY`] holds them:
/// JSON with whole seconds, e.g. `{"timeout":7200,"pdbRetryInterval":20,...}`, and
/// `"localData":"evict"` or `"refuse"` only when the pool file sets it, and `"rules":[...]` only
/// when the pool has drain rules (so the annotation of a pool without them reads as before, and
/// an annotation written before either existed still reads). The pool file's validation keeps
/// the text within [`limits::MAX_DRAIN_ANNOTATION_BYTES`].
pub fn policy_to_annotation(policy: &DrainPolicy) -> String {
    let seconds = AnnotatedPolicy {
        timeout: policy.timeout.as_secs(),
        pdb_retry_interval: policy.pdb_retry_interval.as_secs(),
        volume_detach_timeout: policy.volume_detach_timeout.as_secs(),
        volume_attach_timeout: policy.volume_attach_timeout.as_secs(),
        force_after_unhealthy: policy.force_after_unhealthy.as_secs(),
        local_data: policy.local_data,
        rules: policy.rules.clone(),
        termination_grace_period: policy.termination_grace_period.map(|d| d.as_secs()),
    };
    serde_json::to_string(&seconds).unwrap_or_default()
}

/// Why the drain-policy annotation of a Node was not used (the drain then falls back to the
/// default settings and says so in its status). Each names the annotation and, where there is
/// one, the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnotationError {
    /// The text is not what [`policy_to_annotation`] writes: edited by hand or foreign.
    #[error(
        "annotation {annotation} is not drain settings as nodewright writes them ({reason})",
        annotation = super::ANNOTATION_DRAIN_POLICY
    )]
    Unreadable {
        /// What the JSON reader objected to.
        reason: String,
    },
    /// A duration is zero.
    #[error(
        "annotation {annotation}: {field} is zero",
        annotation = super::ANNOTATION_DRAIN_POLICY
    )]
    Zero {
        /// The field, as the annotation names it (`timeout`, `pdbRetryInterval`, ...).
        field: &'static str,
    },
    /// A duration is longer than the pool file allows for the same field.
    #[error(
        "annotation {annotation}: {field} {seconds}s is longer than the maximum {max}",
        annotation = super::ANNOTATION_DRAIN_POLICY,
        max = limits::short(*max)
    )]
    TooLong {
        /// The field, as the annotation names it.
        field: &'static str,
        /// Its value.
        seconds: u64,
        /// Its maximum (the pool file's, see [`crate::limits`]).
        max: Duration,
    },
}

/// Reads [`policy_to_annotation`]'s text back.
///
/// # Errors
///
/// An edited or foreign annotation is refused rather than trusted: [`AnnotationError`] says
/// why — unreadable, a value of zero, or a value beyond the maximum the pool file allows for
/// that field ([`crate::limits`]).
pub fn policy_from_annotation(text: &str) -> Result<DrainPolicy, AnnotationError> {
    if text.len() > limits::MAX_DRAIN_ANNOTATION_BYTES {
        return Err(AnnotationError::Unreadable {
            reason: format!("longer than {} bytes", limits::MAX_DRAIN_ANNOTATION_BYTES),
        });
    }
    let seconds: AnnotatedPolicy =
        serde_json::from_str(text).map_err(|error| AnnotationError::Unreadable {
            reason: error.to_string(),
        })?;
    let fields = [
        ("timeout", seconds.timeout, limits::MAX_DRAIN_TIMEOUT),
        (
            "pdbRetryInterval",
            seconds.pdb_retry_interval,
            limits::MAX_PDB_RETRY_INTERVAL,
        ),
        (
            "volumeDetachTimeout",
            seconds.volume_detach_timeout,
            limits::MAX_VOLUME_TIMEOUT,
        ),
        (
            "volumeAttachTimeout",
            seconds.volume_attach_timeout,
            limits::MAX_VOLUME_TIMEOUT,
        ),
        (
            "forceAfterUnhealthy",
            seconds.force_after_unhealthy,
            limits::MAX_FORCE_AFTER_UNHEALTHY,
        ),
    ];
    if seconds.rules.len() > limits::MAX_DRAIN_RULES {
        return Err(AnnotationError::Unreadable {
            reason: format!(
                "{} rules, more than the maximum {}",
                seconds.rules.len(),
                limits::MAX_DRAIN_RULES
            ),
        });
    }
    let hard = seconds.termination_grace_period.map(|value| {
        (
            "terminationGracePeriod",
            value,
            limits::MAX_TERMINATION_GRACE_PERIOD,
        )
    });
    for (field, value, max) in fields.into_iter().chain(hard) {
        if value == 0 {
            return Err(AnnotationError::Zero { field });
        }
        if Duration::from_secs(value) > max {
            return Err(AnnotationError::TooLong {
                field,
                seconds: value,
                max,
            });
        }
    }
    Ok(DrainPolicy {
        timeout: Duration::from_secs(seconds.timeout),
        pdb_retry_interval: Duration::from_secs(seconds.pdb_retry_interval),
        volume_detach_timeout: Duration::from_secs(seconds.volume_detach_timeout),
        volume_attach_timeout: Duration::from_secs(seconds.volume_attach_timeout),
        force_after_unhealthy: Duration::from_secs(seconds.force_after_unhealthy),
        local_data: seconds.local_data,
        rules: seconds.rules,
        termination_grace_period: seconds.termination_grace_period.map(Duration::from_secs),
    })
}

/// What a drain can still use of an annotation [`policy_from_annotation`] refused: the pool's
/// settings it carries field by field — every field that reads as a duration within its bounds
/// is kept, every other one takes its default — and what was wrong with each field replaced.
/// Text that is not a JSON object keeps nothing.
pub fn salvage_policy(text: &str) -> (DrainPolicy, Vec<AnnotationError>) {
    let defaults = DrainPolicy::default();
    if text.len() > limits::MAX_DRAIN_ANNOTATION_BYTES {
        let reason = format!("longer than {} bytes", limits::MAX_DRAIN_ANNOTATION_BYTES);
        return (defaults, vec![AnnotationError::Unreadable { reason }]);
    }
    let object = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(object)) => object,
        Ok(_) => {
            let reason = "not a JSON object".to_owned();
            return (defaults, vec![AnnotationError::Unreadable { reason }]);
        }
        Err(error) => {
            let reason = error.to_string();
            return (defaults, vec![AnnotationError::Unreadable { reason }]);
        }
    };
    let mut problems = Vec::new();
    let mut seconds = |field: &'static str, max: Duration, default: Duration| -> Duration {
        let problem = match object.get(field) {
            None => AnnotationError::Unreadable {
                reason: format!("{field} is missing"),
            },
            Some(value) => match value.as_u64() {
                Some(0) => AnnotationError::Zero { field },
                Some(value) if Duration::from_secs(value) > max => AnnotationError::TooLong {
                    field,
                    seconds: value,
                    max,
                },
                Some(value) => return Duration::from_secs(value),
                None => AnnotationError::Unreadable {
                    reason: format!("{field} is not a whole number of seconds"),
                },
            },
        };
        problems.push(problem);
        default
    };
    let mut policy = defaults.clone();
    for field in &super::annotation::DURATIONS {
        let slot = (field.of)(&mut policy);
        *slot = seconds(field.name, field.max, *slot);
    }
    let local_data = match object.get("localData") {
        None => None,
        Some(value) => match serde_json::from_value::<LocalDataPolicy>(value.clone()) {
            Ok(policy) => Some(policy),
            Err(_) => {
                problems.push(AnnotationError::Unreadable {
                    reason: "localData is neither \"evict\" nor \"refuse\"".to_owned(),
                });
                None
            }
        },
    };
    let rules = match object.get("rules") {
        None => Vec::new(),
        Some(value) => match super::rules::read_rules(value) {
            Ok(rules) => rules,
            Err(reason) => {
                problems.push(AnnotationError::Unreadable { reason });
                Vec::new()
            }
        },
    };
    let known = [
        "timeout",
        "pdbRetryInterval",
        "volumeDetachTimeout",
        "volumeAttachTimeout",
        "forceAfterUnhealthy",
        "localData",
        "rules",
        "terminationGracePeriod",
    ];
    for unknown in object.keys().filter(|key| !known.contains(&key.as_str())) {
        problems.push(AnnotationError::Unreadable {
            reason: format!("unknown field {}", crate::text::quoted(unknown)),
        });
    }
    policy.local_data = local_data;
    policy.rules = rules;
    policy.termination_grace_period = object
        .get(HARD_DEADLINE_FIELD)
        .and_then(serde_json::Value::as_u64)
        .filter(|&value| {
            value > 0 && Duration::from_secs(value) <= limits::MAX_TERMINATION_GRACE_PERIOD
        })
        .map(Duration::from_secs);
    (policy, problems)
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AnnotatedPolicy {
    timeout: u64,
    pdb_retry_interval: u64,
    volume_detach_timeout: u64,
    volume_attach_timeout: u64,
    force_after_unhealthy: u64,
    /// Absent from annotations written before the field existed (and from those of pools that
    /// leave it unset): the drain's purpose then decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    local_data: Option<LocalDataPolicy>,
    /// Absent from annotations written before drain rules existed, and for pools without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rules: Vec<super::rules::DrainRule>,
    /// Absent from annotations written before the hard deadline existed, and for pools without
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    termination_grace_period: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_default_is_machine_controller_managers() {
        let policy = DrainPolicy::default();
        assert_eq!(policy.timeout, Duration::from_secs(7200));
        assert_eq!(policy.pdb_retry_interval, Duration::from_secs(20));
        assert_eq!(policy.volume_detach_timeout, Duration::from_secs(120));
        assert_eq!(policy.volume_attach_timeout, Duration::from_secs(90));
        assert_eq!(policy.force_after_unhealthy, Duration::from_secs(300));
        assert_eq!(
            policy_to_annotation(&policy),
            r#"{"timeout":7200,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300}"#
        );
    }

    fn reason(text: &str) -> String {
        match policy_from_annotation(text) {
            Ok(policy) => panic!("{text}: accepted as {policy:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn refuses_annotations_it_did_not_write_and_says_why() {
        const HEAD: &str = "annotation nodewright.io/drain-policy";
        let table: &[(&str, &str)] = &[
            (
                "",
                "is not drain settings as nodewright writes them (EOF while parsing",
            ),
            (
                "2h",
                "is not drain settings as nodewright writes them (invalid type: integer `2`",
            ),
            (
                "{}",
                "is not drain settings as nodewright writes them (missing field `timeout`",
            ),
            (
                r#"{"timeout":0,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300}"#,
                ": timeout is zero",
            ),
            (
                r#"{"timeout":1,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300,"extra":1}"#,
                "is not drain settings as nodewright writes them (unknown field `extra`",
            ),
            (
                r#"{"timeout":-1,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300}"#,
                "is not drain settings as nodewright writes them (invalid value: integer `-1`",
            ),
            (
                r#"{"timeout":18446744073709551615,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300}"#,
                ": timeout 18446744073709551615s is longer than the maximum 24h",
            ),
            (
                r#"{"timeout":7200,"pdbRetryInterval":601,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300}"#,
                ": pdbRetryInterval 601s is longer than the maximum 10m",
            ),
            (
                r#"{"timeout":7200,"pdbRetryInterval":20,"volumeDetachTimeout":3601,"volumeAttachTimeout":90,"forceAfterUnhealthy":300}"#,
                ": volumeDetachTimeout 3601s is longer than the maximum 1h",
            ),
            (
                r#"{"timeout":7200,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":99999999999,"forceAfterUnhealthy":300}"#,
                ": volumeAttachTimeout 99999999999s is longer than the maximum 1h",
            ),
            (
                r#"{"timeout":7200,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":86401}"#,
                ": forceAfterUnhealthy 86401s is longer than the maximum 24h",
            ),
        ];
        for (text, expected) in table {
            let reason = reason(text);
            let expected = format!(
                "{HEAD}{}{expected}",
                if expected.starts_with(':') { "" } else { " " }
            );
            assert!(reason.starts_with(&expected), "{text}: {reason}");
        }
    }

    #[test]
    fn reads_annotations_written_before_local_data_and_with_it() {
        const BEFORE: &str = r#"{"timeout":7200,"pdbRetryInterval":20,"volumeDetachTimeout":120,"volumeAttachTimeout":90,"forceAfterUnhealthy":300}"#;
        assert_eq!(policy_from_annotation(BEFORE), Ok(DrainPolicy::default()));
        for (written, expected) in [
            ("evict", LocalDataPolicy::Evict),
            ("refuse", LocalDataPolicy::Refuse),
        ] {
            let policy = DrainPolicy {
                local_data: Some(expected),
                ..DrainPolicy::default()
            };
            let text = policy_to_annotation(&policy);
            assert_eq!(
                text,
                format!(
                    "{},\"localData\":\"{written}\"}}",
                    BEFORE.trim_end_matches('}')
                )
            );
            assert_eq!(policy_from_annotation(&text), Ok(policy));
        }
        let bad = BEFORE.replace('}', r#","localData":"keep"}"#);
        assert!(
            reason(&bad).contains("unknown variant `keep`"),
            "{}",
            reason(&bad)
        );
    }

    #[test]
    fn accepts_every_field_at_its_maximum() {
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
        assert_eq!(
            policy_from_annotation(&policy_to_annotation(&longest)),
            Ok(longest)
        );
    }

    /// The annotation's JSON with these five values.
    fn annotated(secs: [u64; 5]) -> String {
        format!(
            r#"{{"timeout":{},"pdbRetryInterval":{},"volumeDetachTimeout":{},"volumeAttachTimeout":{},"forceAfterUnhealthy":{}}}"#,
            secs[0], secs[1], secs[2], secs[3], secs[4]
        )
    }

    #[test]
    fn a_refused_annotation_keeps_the_pools_fields_that_read_and_defaults_the_rest() {
        let defaults = DrainPolicy::default();
        let text = r#"{"timeout":999999999999,"pdbRetryInterval":0,"volumeDetachTimeout":300,"volumeAttachTimeout":"2m","forceAfterUnhealthy":600,"localData":"evict","colour":"red"}"#;
        assert!(policy_from_annotation(text).is_err());
        let (policy, problems) = salvage_policy(text);
        assert_eq!(policy.timeout, defaults.timeout);
        assert_eq!(policy.pdb_retry_interval, defaults.pdb_retry_interval);
        assert_eq!(policy.volume_detach_timeout, Duration::from_secs(300));
        assert_eq!(policy.volume_attach_timeout, defaults.volume_attach_timeout);
        assert_eq!(policy.force_after_unhealthy, Duration::from_secs(600));
        assert_eq!(policy.local_data, Some(LocalDataPolicy::Evict));
        let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 4, "{said:?}");
        assert!(said[0].contains("timeout 999999999999s is longer than the maximum"));
        assert!(said[1].ends_with("pdbRetryInterval is zero"));
        assert!(said[2].contains("volumeAttachTimeout is not a whole number of seconds"));
        assert!(said[3].contains("unknown field \"colour\""));

        for text in ["", "[1,2]", "not json", "null"] {
            let (policy, problems) = salvage_policy(text);
            assert_eq!(policy, defaults, "{text}");
            assert_eq!(problems.len(), 1, "{text}");
        }
        let (policy, problems) = salvage_policy(r#"{"timeout":60}"#);
        assert_eq!(policy.timeout, Duration::from_secs(60));
        assert_eq!(problems.len(), 4, "the four missing fields are named");
    }

    proptest! {
        /// Whatever the annotation holds, salvaging never panics and keeps every duration
        /// within the pool file's bounds.
        #[test]
        fn salvage_stays_within_bounds(text in ".*", secs in proptest::array::uniform5(any::<u64>())) {
            let annotated = format!(
                r#"{{"timeout":{},"pdbRetryInterval":{},"volumeDetachTimeout":{},"volumeAttachTimeout":{},"forceAfterUnhealthy":{}}}"#,
                secs[0], secs[1], secs[2], secs[3], secs[4]
            );
            for text in [text.as_str(), annotated.as_str()] {
                let (policy, _) = salvage_policy(text);
                prop_assert!(policy.timeout > Duration::ZERO && policy.timeout <= limits::MAX_DRAIN_TIMEOUT);
                prop_assert!(policy.pdb_retry_interval > Duration::ZERO && policy.pdb_retry_interval <= limits::MAX_PDB_RETRY_INTERVAL);
                prop_assert!(policy.volume_detach_timeout <= limits::MAX_VOLUME_TIMEOUT);
                prop_assert!(policy.volume_attach_timeout <= limits::MAX_VOLUME_TIMEOUT);
                prop_assert!(policy.force_after_unhealthy <= limits::MAX_FORCE_AFTER_UNHEALTHY);
            }
        }
    }

    proptest! {
        #[test]
        fn a_policy_survives_its_annotation(
            secs in proptest::array::uniform5(1u64..=600),
            local_data in proptest::option::of(prop_oneof![
                Just(LocalDataPolicy::Evict),
                Just(LocalDataPolicy::Refuse),
            ]),
            hard in proptest::option::of(1u64..=604_800),
        ) {
            let policy = DrainPolicy {
                timeout: Duration::from_secs(secs[0]),
                pdb_retry_interval: Duration::from_secs(secs[1]),
                volume_detach_timeout: Duration::from_secs(secs[2]),
                volume_attach_timeout: Duration::from_secs(secs[3]),
                force_after_unhealthy: Duration::from_secs(secs[4]),
                local_data,
                rules: Vec::new(),
                termination_grace_period: hard.map(Duration::from_secs),
            };
            prop_assert_eq!(policy_from_annotation(&policy_to_annotation(&policy)), Ok(policy));
        }

        #[test]
        fn any_text_is_read_or_refused_with_a_reason_never_a_panic(text in ".*") {
            match policy_from_annotation(&text) {
                Ok(policy) => prop_assert!(policy.timeout <= limits::MAX_DRAIN_TIMEOUT),
                Err(error) => prop_assert!(
                    error.to_string().starts_with("annotation nodewright.io/drain-policy")
                ),
            }
        }

        #[test]
        fn any_numbers_are_accepted_only_within_every_bound(
            secs in proptest::array::uniform5(prop_oneof![
                Just(0u64),
                1u64..=90_000,
                any::<u64>(),
            ]),
        ) {
            let maxima = [
                limits::MAX_DRAIN_TIMEOUT,
                limits::MAX_PDB_RETRY_INTERVAL,
                limits::MAX_VOLUME_TIMEOUT,
                limits::MAX_VOLUME_TIMEOUT,
                limits::MAX_FORCE_AFTER_UNHEALTHY,
            ];
            let within = secs
                .iter()
                .zip(maxima)
                .all(|(value, max)| *value > 0 && Duration::from_secs(*value) <= max);
            let read = policy_from_annotation(&annotated(secs));
            prop_assert_eq!(read.is_ok(), within, "{:?}", read);
            if let Ok(policy) = read {
                prop_assert_eq!(policy_from_annotation(&policy_to_annotation(&policy)), Ok(policy));
            }
        }
    }
}
