//! A pool's policy for Scheduled Events, as its pool file writes it under
//! `spec.scheduledEvents` ([`ScheduledEventsSpec`]) and as workflows take it, checked and with
//! every default filled in ([`ScheduledEventsPolicy`]).
//!
//! ```yaml
//! spec:
//!   scheduledEvents:
//!     reboot: { action: drain }
//!     freeze: { action: drain, ignoreBelow: 30s }
//!     drainMargin: 30s
//! ```
//!
//! Only Reboot and Freeze take a policy: a Preempt, Redeploy or Terminate takes the VM (or its
//! local disks) away, and nodewright always drains for them.
//!
//! # Defaults
//! - **Freeze: drain, but leave alone a Freeze known to last at most 30 s**
//!   ([`DEFAULT_FREEZE_IGNORE_BELOW`]). A Freeze pauses the VM for a live migration or a host
//!   update, typically a few seconds: the pods keep their memory, their connections mostly
//!   survive, and the Node stays Ready. Evicting every pod for that costs far more (cold caches,
//!   restarts, PodDisruptionBudget budget spent) than the pause. A Freeze of unknown length
//!   (`DurationInSeconds: -1`) or a longer one is drained: nothing says it is short.
//! - **Reboot: drain, then acknowledge.** A reboot stops every pod on the VM anyway; draining
//!   first lets them move under their PodDisruptionBudgets, with their termination grace,
//!   instead of all at once, and acknowledging then lets the reboot happen at once (inside a
//!   maintenance window) rather than at a `NotBefore` that may fall at a worse time.
//! - **`drainMargin`: 30 s** ([`DEFAULT_DRAIN_MARGIN`]): a drain before a Redeploy, Terminate,
//!   Reboot or Freeze must end that long before `NotBefore`, so the acknowledgement (or the
//!   event's own start) finds the Node empty, with room for the agent's one-second poll and the
//!   acknowledgement's round trip.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::document::EventType;
use crate::limits::short;
use crate::pool::FieldError;
use crate::text::quoted;

/// Where the policy lives in a pool file.
pub const SPEC_FIELD: &str = "spec.scheduledEvents";

/// `drainMargin` when unset (see the module's Defaults).
pub const DEFAULT_DRAIN_MARGIN: Duration = Duration::from_secs(30);

/// The longest `drainMargin`: the shortest notice of an event drained ahead (Redeploy's
/// 10 minutes). A larger margin would put every drain's end before the event was announced.
pub const MAX_DRAIN_MARGIN: Duration = Duration::from_secs(10 * 60);

/// `freeze.ignoreBelow` when unset (see the module's Defaults).
pub const DEFAULT_FREEZE_IGNORE_BELOW: Duration = Duration::from_secs(30);

/// The longest `ignoreBelow`: a VM paused or down for more than an hour is an outage, and its
/// pods belong elsewhere.
pub const MAX_IGNORE_BELOW: Duration = Duration::from_secs(3600);

/// `spec.scheduledEvents` as written. Every key is optional; an unset key takes its default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduledEventsSpec {
    /// What a Reboot does (default: drain, then acknowledge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reboot: Option<EventRuleSpec>,
    /// What a Freeze does (default: drain, unless known to last at most 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze: Option<EventRuleSpec>,
    /// How long before `NotBefore` a drain must end (default `30s`, at most `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_margin: Option<String>,
}

/// `spec.scheduledEvents.reboot` or `.freeze` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventRuleSpec {
    /// `drain` (the default) or `ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<EventAction>,
    /// With `drain`: an event whose `DurationInSeconds` is known and at most this is left alone
    /// (`0s` up to `1h`; default `30s` for a Freeze, none for a Reboot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_below: Option<String>,
}

/// What nodewright does about an event of a kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventAction {
    /// Drain the Node before `NotBefore`, then acknowledge.
    #[default]
    Drain,
    /// Publish the event and do nothing: Azure starts it at `NotBefore`.
    Ignore,
}

/// One kind's rule, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRule {
    /// Drain or ignore.
    pub action: EventAction,
    /// With [`EventAction::Drain`]: events known to last at most this are left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_below: Option<Duration>,
}

/// `spec.scheduledEvents` checked, every default filled in: what workflows take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledEventsPolicy {
    /// Reboot.
    pub reboot: EventRule,
    /// Freeze.
    pub freeze: EventRule,
    /// How long before `NotBefore` a drain must end.
    pub drain_margin: Duration,
}

impl Default for ScheduledEventsPolicy {
    fn default() -> Self {
        Self {
            reboot: EventRule {
                action: EventAction::Drain,
                ignore_below: None,
            },
            freeze: EventRule {
                action: EventAction::Drain,
                ignore_below: Some(DEFAULT_FREEZE_IGNORE_BELOW),
            },
            drain_margin: DEFAULT_DRAIN_MARGIN,
        }
    }
}

impl ScheduledEventsPolicy {
    /// The policy `spec` (at `field`, e.g. [`SPEC_FIELD`]) asks for; the defaults when it is
    /// unset.
    ///
    /// # Errors
    ///
    /// Every value out of its bounds, named by its path (`spec.scheduledEvents.freeze.ignoreBelow`)
    /// with its fix.
    pub fn from_spec(
        field: &str,
        spec: Option<&ScheduledEventsSpec>,
    ) -> Result<Self, Vec<FieldError>> {
        let mut policy = Self::default();
        let Some(spec) = spec else {
            return Ok(policy);
        };
        let mut problems = Vec::new();
        if let Some(written) = spec.drain_margin.as_deref() {
            let margin_field = format!("{field}.drainMargin");
            if let Some(margin) = duration(
                &mut problems,
                &margin_field,
                written,
                MAX_DRAIN_MARGIN,
                "30s",
            ) {
                policy.drain_margin = margin;
            }
        }
        let kinds = [
            ("reboot", spec.reboot.as_ref(), &mut policy.reboot),
            ("freeze", spec.freeze.as_ref(), &mut policy.freeze),
        ];
        for (name, written, rule) in kinds {
            if let Some(written) = written {
                *rule = checked_rule(&mut problems, &format!("{field}.{name}"), written, *rule);
            }
        }
        if problems.is_empty() {
            Ok(policy)
        } else {
            Err(problems)
        }
    }

    /// The rule for `event_type` and its name in the pool file (`reboot`, `freeze`); `None` for
    /// the kinds nodewright always drains for, or does not know.
    pub fn rule_for(&self, event_type: &EventType) -> Option<(&'static str, EventRule)> {
        match event_type {
            EventType::Reboot => Some(("reboot", self.reboot)),
            EventType::Freeze => Some(("freeze", self.freeze)),
            _ => None,
        }
    }
}

/// The problems of `spec` (at `field`, e.g. [`SPEC_FIELD`]), in the pool file's words: each
/// names the field, the value, what is wrong and the fix. Empty when it is fine.
pub fn validate(field: &str, spec: &ScheduledEventsSpec) -> Vec<FieldError> {
    ScheduledEventsPolicy::from_spec(field, Some(spec))
        .err()
        .unwrap_or_default()
}

/// `written` (at `field`) over `default`: its action and `ignoreBelow` checked.
fn checked_rule(
    problems: &mut Vec<FieldError>,
    field: &str,
    written: &EventRuleSpec,
    default: EventRule,
) -> EventRule {
    let action = written.action.unwrap_or(default.action);
    let mut rule = EventRule {
        action,
        ignore_below: default.ignore_below,
    };
    if action == EventAction::Ignore {
        rule.ignore_below = None;
    }
    let Some(ignore_below) = written.ignore_below.as_deref() else {
        return rule;
    };
    let ignore_field = format!("{field}.ignoreBelow");
    if action == EventAction::Ignore {
        problems.push(FieldError {
            field: ignore_field,
            value: quoted(ignore_below),
            problem: "has no effect with action: ignore (every such event is left alone)"
                .to_owned(),
            fix: format!(
                "remove {field}.ignoreBelow, or write action: drain to drain for longer events"
            ),
        });
        return rule;
    }
    if let Some(parsed) = duration(
        problems,
        &ignore_field,
        ignore_below,
        MAX_IGNORE_BELOW,
        "30s",
    ) {
        rule.ignore_below = Some(parsed);
    }
    rule
}

/// `written` (at `field`) as a duration from zero to `max`; a problem, with `example` in the
/// fix, when it is not one.
fn duration(
    problems: &mut Vec<FieldError>,
    field: &str,
    written: &str,
    max: Duration,
    example: &str,
) -> Option<Duration> {
    let problem = match humantime::parse_duration(written.trim()) {
        Err(error) => format!("is not a duration ({error})"),
        Ok(parsed) if parsed > max => format!("is longer than {}", short(max)),
        Ok(parsed) => return Some(parsed),
    };
    problems.push(FieldError {
        field: field.to_owned(),
        value: quoted(written),
        problem,
        fix: format!(
            "write a duration from 0s to {} such as \"{example}\" (units: s, m, h)",
            short(max)
        ),
    });
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> ScheduledEventsSpec {
        serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"))
    }

    #[test]
    fn an_unset_policy_takes_the_defaults() {
        let policy = ScheduledEventsPolicy::from_spec(SPEC_FIELD, None);
        assert_eq!(policy, Ok(ScheduledEventsPolicy::default()));
        let empty = ScheduledEventsPolicy::from_spec(SPEC_FIELD, Some(&spec("{}")));
        assert_eq!(empty, Ok(ScheduledEventsPolicy::default()));
        let defaults = ScheduledEventsPolicy::default();
        assert_eq!(defaults.freeze.action, EventAction::Drain);
        assert_eq!(defaults.freeze.ignore_below, Some(Duration::from_secs(30)));
        assert_eq!(defaults.reboot.action, EventAction::Drain);
        assert_eq!(defaults.reboot.ignore_below, None);
        assert_eq!(defaults.drain_margin, Duration::from_secs(30));
    }

    #[test]
    fn a_written_policy_overrides_key_by_key() {
        let written =
            spec("reboot: { action: ignore }\nfreeze: { ignoreBelow: 2m }\ndrainMargin: 1m\n");
        let policy = ScheduledEventsPolicy::from_spec(SPEC_FIELD, Some(&written));
        assert_eq!(
            policy,
            Ok(ScheduledEventsPolicy {
                reboot: EventRule {
                    action: EventAction::Ignore,
                    ignore_below: None,
                },
                freeze: EventRule {
                    action: EventAction::Drain,
                    ignore_below: Some(Duration::from_secs(120)),
                },
                drain_margin: Duration::from_secs(60),
            })
        );
        let drain_every_freeze = spec("freeze: { action: drain, ignoreBelow: 0s }");
        let policy = ScheduledEventsPolicy::from_spec(SPEC_FIELD, Some(&drain_every_freeze));
        assert_eq!(
            policy.map(|p| p.freeze.ignore_below),
            Ok(Some(Duration::ZERO))
        );
    }

    #[test]
    fn unknown_keys_and_actions_are_refused_when_read() {
        for yaml in [
            "rebot: { action: drain }",
            "freeze: { action: evict }",
            "freeze: { ignoreBellow: 30s }",
        ] {
            let read: Result<ScheduledEventsSpec, _> = serde_saphyr::from_str(yaml);
            assert!(read.is_err(), "{yaml} was read");
        }
    }

    #[test]
    fn problems_name_the_field_the_value_and_the_fix() {
        let table = [
            (
                "freeze: { ignoreBelow: 30 }",
                "spec.scheduledEvents.freeze.ignoreBelow: is not a duration (time unit needed, for example 30sec or 30ms) (got \"30\"); write a duration from 0s to 1h such as \"30s\" (units: s, m, h)",
            ),
            (
                "freeze: { ignoreBelow: 2h }",
                "spec.scheduledEvents.freeze.ignoreBelow: is longer than 1h (got \"2h\"); write a duration from 0s to 1h such as \"30s\" (units: s, m, h)",
            ),
            (
                "reboot: { action: ignore, ignoreBelow: 10s }",
                "spec.scheduledEvents.reboot.ignoreBelow: has no effect with action: ignore (every such event is left alone) (got \"10s\"); remove spec.scheduledEvents.reboot.ignoreBelow, or write action: drain to drain for longer events",
            ),
            (
                "drainMargin: 15m",
                "spec.scheduledEvents.drainMargin: is longer than 10m (got \"15m\"); write a duration from 0s to 10m such as \"30s\" (units: s, m, h)",
            ),
        ];
        for (yaml, expected) in table {
            let problems: Vec<String> = validate(SPEC_FIELD, &spec(yaml))
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(problems, [expected], "{yaml}");
        }
        assert!(validate(SPEC_FIELD, &spec("freeze: { action: ignore }")).is_empty());
    }

    #[test]
    fn rules_are_found_for_reboot_and_freeze_only() {
        let policy = ScheduledEventsPolicy::default();
        assert_eq!(
            policy.rule_for(&EventType::Reboot).map(|r| r.0),
            Some("reboot")
        );
        assert_eq!(
            policy.rule_for(&EventType::Freeze).map(|r| r.0),
            Some("freeze")
        );
        for kind in [
            EventType::Preempt,
            EventType::Redeploy,
            EventType::Terminate,
            EventType::Other("SpotRebalanceRecommendation".to_owned()),
        ] {
            assert_eq!(policy.rule_for(&kind), None, "{kind}");
        }
    }
}
