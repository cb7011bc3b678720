//! Checking what was typed before anything starts: durations, counts, the schedule's interval,
//! and the workflow ID `RUN`. Every refusal is [`CliError::InvalidInput`] (exit 2) naming the
//! flag and the syntax it takes.

use std::time::Duration;

use nodewright_model::sweep::{SweepRequest, human};
use nodewright_model::text::quoted;
use nodewright_model::{ClusterName, WorkflowId, limits};

use super::SweepFlags;
use crate::CliError;

/// The interval of `sweep schedule` unless `--every` says otherwise.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(15 * 60);

/// The shortest interval a schedule accepts.
const MIN_EVERY: Duration = Duration::from_secs(1);

/// `text`, the value of `flag`, as a duration of whole seconds (`90s`, `20m`, `1h30m`) of at most
/// `max` (see [`limits`]).
///
/// # Errors
///
/// Not a duration, with a fraction of a second (the sweep counts whole seconds), or longer than
/// `max`.
pub fn duration(flag: &str, text: &str, max: Duration) -> Result<Duration, CliError> {
    let parsed = humantime::parse_duration(text.trim()).map_err(|_| {
        CliError::InvalidInput(format!(
            "{flag}: {} is not a duration (e.g. 90s, 20m, 1h)",
            quoted(text)
        ))
    })?;
    if parsed.subsec_nanos() != 0 {
        return Err(CliError::InvalidInput(format!(
            "{flag}: {} has a fraction of a second; give whole seconds (e.g. 90s, 20m, 1h)",
            quoted(text)
        )));
    }
    if let Some(problem) = limits::longer_than(parsed, max) {
        return Err(CliError::InvalidInput(format!(
            "{flag}: {} {problem}; give at most {} (e.g. 90s, 20m, 1h)",
            quoted(text),
            limits::short(max)
        )));
    }
    Ok(parsed)
}

/// `--every` of `sweep schedule` when given: a duration of at least 1s and at most
/// [`limits::MAX_SWEEP_INTERVAL`]. Not given, the schedule keeps its interval (a new one takes
/// [`DEFAULT_EVERY`]).
///
/// # Errors
///
/// Not a duration, shorter than 1s or longer than the maximum.
pub fn every(text: Option<&str>) -> Result<Option<Duration>, CliError> {
    let Some(text) = text else {
        return Ok(None);
    };
    let every = duration("--every", text, limits::MAX_SWEEP_INTERVAL)?;
    if every < MIN_EVERY {
        return Err(CliError::InvalidInput(format!(
            "--every: {} is shorter than 1s (e.g. 15m, 1h)",
            quoted(text)
        )));
    }
    Ok(Some(every))
}

/// The sweep flags as typed and checked: `None` where the flag was not given (a new sweep takes
/// the default, a schedule keeps its value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypedSweep {
    /// `--dry-run` / `--dry-run=false`.
    pub dry_run: Option<bool>,
    /// `--remediate` / `--remediate=false`.
    pub remediate: Option<bool>,
    /// `--max-deletions`.
    pub max_deletions: Option<u32>,
    /// `--grace`.
    pub grace: Option<Duration>,
    /// `--health-timeout`.
    pub health_timeout: Option<Duration>,
    /// `--approval-timeout`.
    pub approval_timeout: Option<Duration>,
    /// `--parallelism`.
    pub parallelism: Option<u32>,
    /// `--brake-percent`.
    pub brake_percent: Option<u32>,
}

impl TypedSweep {
    /// `base` with every flag given put in; the others keep `base`'s value.
    pub fn over(&self, base: SweepRequest) -> SweepRequest {
        SweepRequest {
            dry_run: self.dry_run.unwrap_or(base.dry_run),
            remediate: self.remediate.unwrap_or(base.remediate),
            max_deletions: self.max_deletions.unwrap_or(base.max_deletions),
            grace: self.grace.unwrap_or(base.grace),
            health_timeout: self.health_timeout.unwrap_or(base.health_timeout),
            approval_timeout: self.approval_timeout.unwrap_or(base.approval_timeout),
            parallelism: self.parallelism.unwrap_or(base.parallelism),
            brake_percent: self.brake_percent.unwrap_or(base.brake_percent),
            cluster: base.cluster,
        }
    }
}

/// Why `--parallelism` `n` is refused, if it is (at least 1, at most
/// [`limits::MAX_SWEEP_PARALLELISM`]).
fn parallelism_problem(n: u32) -> Option<String> {
    if n == 0 {
        return Some("0 would remove nothing; give at least 1 (default 5)".to_owned());
    }
    (n > limits::MAX_SWEEP_PARALLELISM).then(|| {
        format!(
            "{n} is more than the maximum {max}; give at most {max} (default 5): ARM writes queue up beyond that",
            max = limits::MAX_SWEEP_PARALLELISM
        )
    })
}

/// Why `--brake-percent` `percent` is refused, if it is (at most
/// [`limits::MAX_SWEEP_BRAKE_PERCENT`]).
fn brake_percent_problem(percent: u32) -> Option<String> {
    (percent > limits::MAX_SWEEP_BRAKE_PERCENT).then(|| {
        format!(
            "{percent} is more than the maximum {max}; give at most {max} (default {default}): a sweep must not remove half a cluster on a wrong listing",
            max = limits::MAX_SWEEP_BRAKE_PERCENT,
            default = nodewright_model::sweep::brake::DEFAULT_BRAKE_PERCENT
        )
    })
}

impl SweepFlags {
    /// The flags given, each checked.
    ///
    /// # Errors
    ///
    /// A duration that is not one or is longer than its maximum ([`limits`]), or a
    /// `--parallelism` of 0 or more than [`limits::MAX_SWEEP_PARALLELISM`], or a
    /// `--brake-percent` over [`limits::MAX_SWEEP_BRAKE_PERCENT`].
    pub fn checked(&self) -> Result<TypedSweep, CliError> {
        let refused =
            |flag: &str, problem: String| CliError::InvalidInput(format!("{flag}: {problem}"));
        if let Some(problem) = self.parallelism.and_then(parallelism_problem) {
            return Err(refused("--parallelism", problem));
        }
        if let Some(problem) = self.brake_percent.and_then(brake_percent_problem) {
            return Err(refused("--brake-percent", problem));
        }
        let duration_of = |flag: &str, text: &Option<String>, min: Duration, max: Duration| {
            text.as_deref()
                .map(|text| {
                    let value = duration(flag, text, max)?;
                    if value < min {
                        return Err(CliError::InvalidInput(format!(
                            "{flag}: {} is shorter than the minimum {}; give at least {} (e.g. 90s, 20m, 1h)",
                            quoted(text),
                            limits::short(min),
                            limits::short(min)
                        )));
                    }
                    Ok(value)
                })
                .transpose()
        };
        Ok(TypedSweep {
            dry_run: self.dry_run,
            remediate: self.remediate,
            max_deletions: self.max_deletions,
            grace: duration_of(
                "--grace",
                &self.grace,
                limits::MIN_SWEEP_GRACE,
                limits::MAX_SWEEP_GRACE,
            )?,
            health_timeout: duration_of(
                "--health-timeout",
                &self.health_timeout,
                limits::MIN_SWEEP_HEALTH_TIMEOUT,
                limits::MAX_SWEEP_HEALTH_TIMEOUT,
            )?,
            approval_timeout: duration_of(
                "--approval-timeout",
                &self.approval_timeout,
                Duration::from_secs(1),
                limits::MAX_APPROVAL_TIMEOUT,
            )?,
            parallelism: self.parallelism,
            brake_percent: self.brake_percent,
        })
    }

    /// The sweep of `cluster` the flags ask for: every default the flags leave alone.
    ///
    /// # Errors
    ///
    /// As [`SweepFlags::checked`], and the request refused by the rules OrphanSweep checks
    /// (`SweepRequest::check`).
    pub fn request(&self, cluster: &ClusterName) -> Result<SweepRequest, CliError> {
        let request = self.checked()?.over(SweepRequest::new(cluster.clone()));
        request.check()?;
        Ok(request)
    }
}

/// The one-line summary of a sweep, for the Temporal UI and the CLI:
/// `orphan sweep of cluster prod (dry run, max deletions 10, grace 20m)`.
pub fn summary(request: &SweepRequest) -> String {
    let mode = match (request.dry_run, request.remediate) {
        (true, false) => "dry run",
        (true, true) => "dry run, remediating",
        (false, true) => "remediating",
        (false, false) => "deleting orphans",
    };
    format!(
        "orphan sweep of cluster {} ({mode}, max deletions {}, grace {})",
        request.cluster,
        request.max_deletions,
        human(request.grace)
    )
}

/// `RUN` as typed: the workflow ID of a sweep (`sweep/prod`, `sweep/prod-2026-04-01T10:15:00Z`).
///
/// # Errors
///
/// Not a sweep's workflow ID, or one with a quote (no workflow ID nodewright makes has one).
pub fn run_id(text: &str) -> Result<WorkflowId, CliError> {
    let text = text.trim();
    let well_formed = text
        .strip_prefix("sweep/")
        .is_some_and(|rest| !rest.is_empty())
        && !text.contains(['\'', '"', '\\'])
        && !text.chars().any(char::is_whitespace);
    if !well_formed {
        return Err(CliError::InvalidInput(format!(
            "RUN: {} is not a sweep's workflow ID; give one like sweep/prod or sweep/prod-2026-04-01T10:15:00Z (`nodewright runs` lists them), or leave it out",
            quoted(text)
        )));
    }
    // `WorkflowId` has no constructor from an existing ID; its serde form is the plain string.
    serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(|error| {
        CliError::InvalidInput(format!(
            "RUN: {} is not a workflow ID: {error}",
            quoted(text)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> SweepFlags {
        SweepFlags {
            dry_run: None,
            remediate: None,
            max_deletions: None,
            grace: None,
            health_timeout: None,
            approval_timeout: None,
            parallelism: None,
            brake_percent: None,
        }
    }

    fn cluster() -> ClusterName {
        ClusterName::parse("cluster", "prod").unwrap_or_else(|e| panic!("{e}"))
    }

    fn message(result: Result<impl std::fmt::Debug, CliError>) -> String {
        match result {
            Err(CliError::InvalidInput(message)) => message,
            other => panic!("expected invalid input, got {other:?}"),
        }
    }

    #[test]
    fn durations_take_humantime_whole_seconds() {
        for (text, seconds) in [("90s", 90), ("20m", 1200), ("1h", 3600), ("1h 30m", 5400)] {
            assert_eq!(
                duration("--grace", text, limits::MAX_SWEEP_GRACE).ok(),
                Some(Duration::from_secs(seconds)),
                "{text}"
            );
        }
        assert_eq!(
            message(duration("--grace", "soon", limits::MAX_SWEEP_GRACE)),
            r#"--grace: "soon" is not a duration (e.g. 90s, 20m, 1h)"#
        );
        assert_eq!(
            message(duration(
                "--health-timeout",
                "90",
                limits::MAX_SWEEP_HEALTH_TIMEOUT
            )),
            r#"--health-timeout: "90" is not a duration (e.g. 90s, 20m, 1h)"#
        );
        assert_eq!(
            message(duration(
                "--approval-timeout",
                "1500ms",
                limits::MAX_APPROVAL_TIMEOUT
            )),
            r#"--approval-timeout: "1500ms" has a fraction of a second; give whole seconds (e.g. 90s, 20m, 1h)"#
        );
    }

    #[test]
    fn durations_beyond_their_maximum_are_refused_by_name() {
        let table: &[(SweepFlags, &str)] = &[
            (
                SweepFlags {
                    grace: Some("8days".to_owned()),
                    ..flags()
                },
                r#"--grace: "8days" is longer than the maximum 168h; give at most 168h (e.g. 90s, 20m, 1h)"#,
            ),
            (
                SweepFlags {
                    health_timeout: Some("25h".to_owned()),
                    ..flags()
                },
                r#"--health-timeout: "25h" is longer than the maximum 24h; give at most 24h (e.g. 90s, 20m, 1h)"#,
            ),
            (
                SweepFlags {
                    approval_timeout: Some("18446744073709551615s".to_owned()),
                    ..flags()
                },
                r#"--approval-timeout: "18446744073709551615s" is longer than the maximum 24h; give at most 24h (e.g. 90s, 20m, 1h)"#,
            ),
            (
                SweepFlags {
                    parallelism: Some(51),
                    ..flags()
                },
                "--parallelism: 51 is more than the maximum 50; give at most 50 (default 5): ARM writes queue up beyond that",
            ),
            (
                SweepFlags {
                    grace: Some("0s".to_owned()),
                    ..flags()
                },
                r#"--grace: "0s" is shorter than the minimum 10s; give at least 10s (e.g. 90s, 20m, 1h)"#,
            ),
            (
                SweepFlags {
                    health_timeout: Some("5s".to_owned()),
                    ..flags()
                },
                r#"--health-timeout: "5s" is shorter than the minimum 10s; give at least 10s (e.g. 90s, 20m, 1h)"#,
            ),
        ];
        for (typed, expected) in table {
            assert_eq!(&message(typed.request(&cluster())), expected);
        }
        let longest = SweepFlags {
            grace: Some("7days".to_owned()),
            health_timeout: Some("24h".to_owned()),
            approval_timeout: Some("1day".to_owned()),
            parallelism: Some(50),
            ..flags()
        };
        assert!(longest.request(&cluster()).is_ok());
        assert_eq!(
            every(Some("31days")).ok(),
            Some(Some(limits::MAX_SWEEP_INTERVAL))
        );
        assert_eq!(
            message(every(Some("32days"))),
            r#"--every: "32days" is longer than the maximum 744h; give at most 744h (e.g. 90s, 20m, 1h)"#
        );
    }

    #[test]
    fn the_interval_is_optional_and_at_least_1s() {
        assert_eq!(
            every(None).ok(),
            Some(None),
            "not given: kept, or the default"
        );
        assert_eq!(DEFAULT_EVERY, Duration::from_secs(900));
        assert_eq!(
            every(Some("1h")).ok(),
            Some(Some(Duration::from_secs(3600)))
        );
        assert_eq!(every(Some("1s")).ok(), Some(Some(Duration::from_secs(1))));
        assert_eq!(
            message(every(Some("0s"))),
            r#"--every: "0s" is shorter than 1s (e.g. 15m, 1h)"#
        );
        assert_eq!(
            message(every(Some("often"))),
            r#"--every: "often" is not a duration (e.g. 90s, 20m, 1h)"#
        );
    }

    #[test]
    fn flags_become_the_request_with_every_other_default() {
        assert_eq!(
            flags().request(&cluster()).ok(),
            Some(SweepRequest::new(cluster()))
        );
        let typed = SweepFlags {
            dry_run: Some(true),
            remediate: Some(true),
            max_deletions: Some(0),
            grace: Some("5m".to_owned()),
            health_timeout: Some("2m".to_owned()),
            approval_timeout: Some("30m".to_owned()),
            parallelism: Some(2),
            brake_percent: Some(35),
        };
        let request = typed.request(&cluster()).unwrap_or_else(|e| panic!("{e}"));
        assert!(request.dry_run && request.remediate);
        assert_eq!(request.max_deletions, 0, "0: every removal needs approval");
        assert_eq!(request.grace, Duration::from_secs(300));
        assert_eq!(request.health_timeout, Duration::from_secs(120));
        assert_eq!(request.approval_timeout, Duration::from_secs(1800));
        assert_eq!(request.parallelism, 2);
    }

    #[test]
    fn bad_flags_are_refused_by_name() {
        let soon = SweepFlags {
            grace: Some("soon".to_owned()),
            ..flags()
        };
        assert_eq!(
            message(soon.request(&cluster())),
            r#"--grace: "soon" is not a duration (e.g. 90s, 20m, 1h)"#
        );
        let none_at_once = SweepFlags {
            parallelism: Some(0),
            ..flags()
        };
        assert_eq!(
            message(none_at_once.request(&cluster())),
            "--parallelism: 0 would remove nothing; give at least 1 (default 5)"
        );
        let half_and_more = SweepFlags {
            brake_percent: Some(51),
            ..flags()
        };
        assert_eq!(
            message(half_and_more.request(&cluster())),
            "--brake-percent: 51 is more than the maximum 50; give at most 50 (default 20): a sweep must not remove half a cluster on a wrong listing"
        );
        let ten = SweepFlags {
            brake_percent: Some(10),
            ..flags()
        };
        assert_eq!(
            ten.request(&cluster()).map(|r| r.brake_percent).ok(),
            Some(10)
        );
    }

    #[test]
    fn the_summary_names_cluster_mode_cap_and_grace() {
        let mut request = SweepRequest::new(cluster());
        assert_eq!(
            summary(&request),
            "orphan sweep of cluster prod (deleting orphans, max deletions 10, grace 20m)"
        );
        request.dry_run = true;
        request.max_deletions = 3;
        request.grace = Duration::from_secs(90);
        assert_eq!(
            summary(&request),
            "orphan sweep of cluster prod (dry run, max deletions 3, grace 1m 30s)"
        );
    }

    #[test]
    fn run_is_a_sweeps_workflow_id() {
        for text in ["sweep/prod", "sweep/prod-2026-04-01T10:15:00Z"] {
            assert_eq!(
                run_id(text).map(|id| id.to_string()).ok().as_deref(),
                Some(text)
            );
        }
        for text in [
            "prod",
            "sweep/",
            "rollout/prod/web",
            "sweep/a' OR 'x",
            "sweep/a b",
        ] {
            assert!(message(run_id(text)).starts_with("RUN: "), "{text}");
        }
    }
}
