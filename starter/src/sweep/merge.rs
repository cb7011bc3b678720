//! What `sweep schedule` puts in the schedule: the flags given on this command line over what
//! the schedule has (a new schedule: over the defaults), and where each setting's value comes
//! from. Pure: [`super::schedule`] reads and writes the schedule.

use std::time::Duration;

use nodewright_model::sweep::{SweepRequest, human};
use nodewright_model::{ClusterName, limits};
use serde_json::Value;

use super::flags::{DEFAULT_EVERY, TypedSweep};
use super::sweep_id;
use crate::CliError;

/// What an existing schedule has: its interval (`None` when its spec is not one interval, e.g.
/// a calendar set outside nodewright) and the request each of its runs starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    /// The one interval of its spec.
    pub every: Option<Duration>,
    /// The action's workflow input.
    pub request: SweepRequest,
}

/// What this command line gives, checked: `--every` and the sweep flags, `None` where not given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Typed {
    /// `--every`.
    pub every: Option<Duration>,
    /// The sweep flags.
    pub sweep: TypedSweep,
}

/// Where a setting's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A new schedule, the flag not given: the default.
    Default,
    /// The flag not given: the schedule's value.
    Kept,
    /// Given with the value it had (the schedule's, or for a new schedule the default).
    Unchanged,
    /// Given with another value than it had.
    Changed {
        /// The schedule's value before (a new schedule: the default), as [`Setting::value`].
        was: Value,
    },
}

/// One setting of the schedule after this command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// Its flag without the dashes (`max-deletions`).
    pub flag: &'static str,
    /// Its key in `--output json` (`maxDeletions`).
    pub key: &'static str,
    /// Its value: counts and booleans as such, durations as text (`20m`), like `every`.
    pub value: Value,
    /// Where the value comes from.
    pub origin: Origin,
}

/// The schedule after this command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// How often a sweep starts.
    pub every: Duration,
    /// The request each run starts with.
    pub request: SweepRequest,
    /// Every setting, `every` first, in the order of the flags.
    pub settings: Vec<Setting>,
    /// No schedule existed: the settings not given are the defaults.
    pub created: bool,
}

impl Merged {
    /// The settings this command changed (given with another value than they had).
    pub fn changed(&self) -> impl Iterator<Item = &Setting> {
        self.settings
            .iter()
            .filter(|setting| matches!(setting.origin, Origin::Changed { .. }))
    }
}

/// The schedule's settings after this command: each flag `typed` gives, over what `current`
/// has; with no schedule yet, over the defaults ([`SweepRequest::new`], [`DEFAULT_EVERY`]).
///
/// # Errors
///
/// A kept value out of its bounds (a schedule written outside nodewright, or before a bound
/// was lowered), or no `--every` for a schedule whose spec is not one interval: each names the
/// flag that replaces it. (The values given were checked with their flags.)
pub fn merge(
    cluster: &ClusterName,
    typed: &Typed,
    current: Option<&Current>,
) -> Result<Merged, CliError> {
    let (before_every, before_request) = match current {
        None => (Some(DEFAULT_EVERY), SweepRequest::new(cluster.clone())),
        Some(current) => (
            current.every,
            SweepRequest {
                cluster: cluster.clone(),
                ..current.request.clone()
            },
        ),
    };
    let every = match typed.every.or(before_every) {
        Some(every) => every,
        None => {
            return Err(CliError::InvalidInput(format!(
                "--every: the schedule {} does not run on one interval (its spec was set outside nodewright); give --every (e.g. 15m) to replace it",
                sweep_id(cluster)
            )));
        }
    };
    let request = typed.sweep.over(before_request.clone());
    let given = given(typed);
    if let Some(problem) = out_of_bounds(every, &request)
        .into_iter()
        .find(|(index, _)| !given[*index])
        .map(|(_, problem)| problem)
    {
        return Err(CliError::InvalidInput(format!(
            "{problem} (the schedule {} has it); give the flag to replace it",
            sweep_id(cluster)
        )));
    }
    request.check()?;
    let before = values(before_every, &before_request);
    let after = values(Some(every), &request);
    let settings = after
        .into_iter()
        .zip(before)
        .zip(given)
        .map(|(((flag, key, value), (_, _, was)), given)| {
            let value = value.unwrap_or(Value::Null);
            let origin = match (given, current.is_none()) {
                (false, true) => Origin::Default,
                (false, false) => Origin::Kept,
                (true, _) if was.as_ref() == Some(&value) => Origin::Unchanged,
                (true, _) => Origin::Changed {
                    was: was.unwrap_or_else(|| Value::from("another spec")),
                },
            };
            Setting {
                flag,
                key,
                value,
                origin,
            }
        })
        .collect();
    Ok(Merged {
        every,
        request,
        settings,
        created: current.is_none(),
    })
}

/// How many settings a schedule has: `every` and the eight sweep flags.
const SETTINGS: usize = 9;

/// Each setting's flag, JSON key and value (`None`: an interval that is not one), in the order
/// of [`given`].
fn values(
    every: Option<Duration>,
    request: &SweepRequest,
) -> [(&'static str, &'static str, Option<Value>); SETTINGS] {
    let duration = |d: Duration| Some(Value::String(human(d)));
    [
        ("every", "every", every.and_then(duration)),
        ("dry-run", "dryRun", Some(Value::Bool(request.dry_run))),
        (
            "remediate",
            "remediate",
            Some(Value::Bool(request.remediate)),
        ),
        (
            "max-deletions",
            "maxDeletions",
            Some(request.max_deletions.into()),
        ),
        ("grace", "grace", duration(request.grace)),
        (
            "health-timeout",
            "healthTimeout",
            duration(request.health_timeout),
        ),
        (
            "approval-timeout",
            "approvalTimeout",
            duration(request.approval_timeout),
        ),
        (
            "parallelism",
            "parallelism",
            Some(request.parallelism.into()),
        ),
        (
            "brake-percent",
            "brakePercent",
            Some(request.brake_percent.into()),
        ),
    ]
}

/// Which settings this command line gives, in the order of [`values`].
fn given(typed: &Typed) -> [bool; SETTINGS] {
    let sweep = &typed.sweep;
    [
        typed.every.is_some(),
        sweep.dry_run.is_some(),
        sweep.remediate.is_some(),
        sweep.max_deletions.is_some(),
        sweep.grace.is_some(),
        sweep.health_timeout.is_some(),
        sweep.approval_timeout.is_some(),
        sweep.parallelism.is_some(),
        sweep.brake_percent.is_some(),
    ]
}

/// The settings outside the bounds the flags check (by their index in [`values`]), each with
/// a sentence naming its flag.
fn out_of_bounds(every: Duration, request: &SweepRequest) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut check = |index: usize, flag: &str, bad: bool, value: String, bounds: String| {
        if bad {
            found.push((index, format!("--{flag}: {value} is not within {bounds}")));
        }
    };
    let span = |low: &str, high: Duration| format!("{low}–{}", limits::short(high));
    check(
        0,
        "every",
        every < Duration::from_secs(1) || every > limits::MAX_SWEEP_INTERVAL,
        human(every),
        span("1s", limits::MAX_SWEEP_INTERVAL),
    );
    let durations = [
        (
            4,
            "grace",
            request.grace,
            limits::MIN_SWEEP_GRACE,
            limits::MAX_SWEEP_GRACE,
        ),
        (
            5,
            "health-timeout",
            request.health_timeout,
            limits::MIN_SWEEP_HEALTH_TIMEOUT,
            limits::MAX_SWEEP_HEALTH_TIMEOUT,
        ),
        (
            6,
            "approval-timeout",
            request.approval_timeout,
            Duration::from_secs(1),
            limits::MAX_APPROVAL_TIMEOUT,
        ),
    ];
    for (index, flag, value, min, max) in durations {
        check(
            index,
            flag,
            value < min || value > max,
            human(value),
            span(&limits::short(min), max),
        );
    }
    let parallelism = request.parallelism;
    check(
        7,
        "parallelism",
        parallelism == 0 || parallelism > limits::MAX_SWEEP_PARALLELISM,
        parallelism.to_string(),
        format!("1–{}", limits::MAX_SWEEP_PARALLELISM),
    );
    check(
        8,
        "brake-percent",
        request.brake_percent > limits::MAX_SWEEP_BRAKE_PERCENT,
        request.brake_percent.to_string(),
        format!("0–{}", limits::MAX_SWEEP_BRAKE_PERCENT),
    );
    found
}

/// A setting's value for people: text without quotes, numbers and booleans as they are.
pub fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> ClusterName {
        ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"))
    }

    /// A schedule made with `--dry-run --max-deletions 3 --every 1h`.
    fn dry_run_schedule() -> Current {
        let mut request = SweepRequest::new(cluster());
        request.dry_run = true;
        request.max_deletions = 3;
        Current {
            every: Some(Duration::from_secs(3600)),
            request,
        }
    }

    fn merged(typed: &Typed, current: Option<&Current>) -> Merged {
        merge(&cluster(), typed, current).unwrap_or_else(|e| panic!("{e}"))
    }

    fn origin<'a>(merged: &'a Merged, flag: &str) -> &'a Origin {
        match merged.settings.iter().find(|s| s.flag == flag) {
            Some(setting) => &setting.origin,
            None => panic!("no setting {flag}"),
        }
    }

    fn message(result: Result<Merged, CliError>) -> String {
        match result {
            Err(CliError::InvalidInput(message)) => message,
            other => panic!("expected invalid input, got {other:?}"),
        }
    }

    #[test]
    fn one_flag_changed_keeps_every_other_setting() {
        let current = dry_run_schedule();
        let typed = Typed {
            every: Some(Duration::from_secs(7200)),
            ..Typed::default()
        };
        let after = merged(&typed, Some(&current));
        assert_eq!(after.every, Duration::from_secs(7200));
        assert_eq!(
            after.request, current.request,
            "the request is the schedule's"
        );
        assert!(!after.created);
        assert_eq!(
            origin(&after, "every"),
            &Origin::Changed {
                was: Value::from("1h")
            }
        );
        for flag in ["dry-run", "max-deletions", "grace", "parallelism"] {
            assert_eq!(origin(&after, flag), &Origin::Kept, "{flag}");
        }
        let changed: Vec<&str> = after.changed().map(|s| s.key).collect();
        assert_eq!(changed, ["every"]);
    }

    #[test]
    fn every_setting_a_schedule_has_is_kept() {
        let mut request = SweepRequest::new(cluster());
        request.dry_run = true;
        request.remediate = true;
        request.max_deletions = 0;
        request.grace = Duration::from_secs(300);
        request.health_timeout = Duration::from_secs(120);
        request.approval_timeout = Duration::from_secs(1800);
        request.parallelism = 2;
        request.brake_percent = 35;
        let current = Current {
            every: Some(Duration::from_secs(600)),
            request,
        };
        let typed = Typed {
            sweep: TypedSweep {
                max_deletions: Some(4),
                ..TypedSweep::default()
            },
            ..Typed::default()
        };
        let after = merged(&typed, Some(&current));
        assert_eq!(after.every, Duration::from_secs(600));
        assert_eq!(
            after.request,
            SweepRequest {
                max_deletions: 4,
                ..current.request.clone()
            }
        );
        let kept = after
            .settings
            .iter()
            .filter(|s| s.origin == Origin::Kept)
            .count();
        assert_eq!(kept, SETTINGS - 1, "all but --max-deletions");
        let value = |key: &str| {
            after
                .settings
                .iter()
                .find(|s| s.key == key)
                .map(|s| &s.value)
        };
        assert_eq!(value("grace"), Some(&Value::from("5m")));
        assert_eq!(value("brakePercent"), Some(&Value::from(35)));
        assert_eq!(value("remediate"), Some(&Value::Bool(true)));
    }

    #[test]
    fn a_boolean_is_turned_off_and_a_value_given_again_is_unchanged() {
        let current = dry_run_schedule();
        let typed = Typed {
            sweep: TypedSweep {
                dry_run: Some(false),
                max_deletions: Some(3),
                ..TypedSweep::default()
            },
            ..Typed::default()
        };
        let after = merged(&typed, Some(&current));
        assert!(!after.request.dry_run, "--dry-run=false turns it off");
        assert_eq!(after.request.max_deletions, 3);
        assert_eq!(after.every, Duration::from_secs(3600));
        assert_eq!(
            origin(&after, "dry-run"),
            &Origin::Changed {
                was: Value::Bool(true)
            }
        );
        assert_eq!(origin(&after, "max-deletions"), &Origin::Unchanged);
        assert_eq!(origin(&after, "every"), &Origin::Kept);
    }

    #[test]
    fn a_first_schedule_takes_the_defaults_for_the_flags_not_given() {
        let typed = Typed {
            every: Some(Duration::from_secs(3600)),
            sweep: TypedSweep {
                dry_run: Some(true),
                max_deletions: Some(3),
                parallelism: Some(5),
                ..TypedSweep::default()
            },
        };
        let after = merged(&typed, None);
        assert!(after.created);
        assert_eq!(after.request, dry_run_schedule().request);
        assert_eq!(after.every, Duration::from_secs(3600));
        assert_eq!(
            origin(&after, "max-deletions"),
            &Origin::Changed {
                was: Value::from(10)
            }
        );
        assert_eq!(origin(&after, "parallelism"), &Origin::Unchanged);
        assert_eq!(origin(&after, "grace"), &Origin::Default);
        let nothing = merged(&Typed::default(), None);
        assert_eq!(nothing.every, DEFAULT_EVERY);
        assert_eq!(nothing.request, SweepRequest::new(cluster()));
        assert_eq!(nothing.changed().count(), 0);
        let keys: Vec<&str> = nothing.settings.iter().map(|s| s.key).collect();
        assert_eq!(
            keys,
            [
                "every",
                "dryRun",
                "remediate",
                "maxDeletions",
                "grace",
                "healthTimeout",
                "approvalTimeout",
                "parallelism",
                "brakePercent"
            ]
        );
    }

    #[test]
    fn every_flag_given_is_a_change_of_its_own_setting() {
        // `values` and `given` list the settings in the same order.
        let current = dry_run_schedule();
        // The shortest grace and health timeout the flags accept (the workflow's input check
        // refuses less, `SweepRequest::check`).
        let shortest = Duration::from_secs(10);
        let one_each: [(&str, TypedSweep); 8] = [
            (
                "dryRun",
                TypedSweep {
                    dry_run: Some(false),
                    ..TypedSweep::default()
                },
            ),
            (
                "remediate",
                TypedSweep {
                    remediate: Some(true),
                    ..TypedSweep::default()
                },
            ),
            (
                "maxDeletions",
                TypedSweep {
                    max_deletions: Some(9),
                    ..TypedSweep::default()
                },
            ),
            (
                "grace",
                TypedSweep {
                    grace: Some(shortest),
                    ..TypedSweep::default()
                },
            ),
            (
                "healthTimeout",
                TypedSweep {
                    health_timeout: Some(shortest),
                    ..TypedSweep::default()
                },
            ),
            (
                "approvalTimeout",
                TypedSweep {
                    approval_timeout: Some(shortest),
                    ..TypedSweep::default()
                },
            ),
            (
                "parallelism",
                TypedSweep {
                    parallelism: Some(9),
                    ..TypedSweep::default()
                },
            ),
            (
                "brakePercent",
                TypedSweep {
                    brake_percent: Some(9),
                    ..TypedSweep::default()
                },
            ),
        ];
        for (key, sweep) in one_each {
            let after = merged(&Typed { every: None, sweep }, Some(&current));
            let changed: Vec<&str> = after.changed().map(|s| s.key).collect();
            assert_eq!(changed, [key]);
        }
    }

    #[test]
    fn values_out_of_bounds_are_refused_naming_the_flag() {
        // A value typed out of bounds is refused by its flag before anything merges.
        let flags = crate::sweep::SweepFlags {
            parallelism: Some(0),
            ..crate::sweep::SweepFlags::default()
        };
        match flags.checked() {
            Err(CliError::InvalidInput(message)) => assert_eq!(
                message,
                "--parallelism: 0 would remove nothing; give at least 1 (default 5)"
            ),
            other => panic!("{other:?}"),
        }
        // A kept value out of bounds (written outside nodewright) is refused naming its flag...
        let mut current = dry_run_schedule();
        current.request.parallelism = 0;
        assert_eq!(
            message(merge(&cluster(), &Typed::default(), Some(&current))),
            "--parallelism: 0 is not within 1–50 (the schedule sweep/prod has it); give the flag to replace it"
        );
        current.request.parallelism = 5;
        current.request.grace = Duration::from_secs(8 * 24 * 3600);
        assert_eq!(
            message(merge(&cluster(), &Typed::default(), Some(&current))),
            "--grace: 8days is not within 10s–168h (the schedule sweep/prod has it); give the flag to replace it"
        );
        // ... and replaced when the flag is given.
        let replaced = Typed {
            sweep: TypedSweep {
                grace: Some(Duration::from_secs(600)),
                ..TypedSweep::default()
            },
            ..Typed::default()
        };
        assert_eq!(
            merged(&replaced, Some(&current)).request.grace,
            Duration::from_secs(600)
        );
        // A spec that is not one interval needs --every.
        current.every = None;
        assert_eq!(
            message(merge(&cluster(), &replaced, Some(&current))),
            "--every: the schedule sweep/prod does not run on one interval (its spec was set outside nodewright); give --every (e.g. 15m) to replace it"
        );
        let with_every = Typed {
            every: Some(Duration::from_secs(900)),
            ..replaced
        };
        let after = merged(&with_every, Some(&current));
        assert_eq!(
            origin(&after, "every"),
            &Origin::Changed {
                was: Value::from("another spec")
            }
        );
    }
}
