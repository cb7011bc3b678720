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

/// `--every` of `sweep schedule`: a duration of at least 1s and at most
/// [`limits::MAX_SWEEP_INTERVAL`], default 15m.
///
/// # Errors
///
/// Not a duration, shorter than 1s or longer than the maximum.
pub fn every(text: Option<&str>) -> Result<Duration, CliError> {
    let Some(text) = text else {
        return Ok(DEFAULT_EVERY);
    };
    let every = duration("--every", text, limits::MAX_SWEEP_INTERVAL)?;
    if every < MIN_EVERY {
        return Err(CliError::InvalidInput(format!(
            "--every: {} is shorter than 1s (e.g. 15m, 1h)",
            quoted(text)
        )));
    }
    Ok(every)
}

impl SweepFlags {
    /// The sweep of `cluster` the flags ask for: every default the flags leave alone.
    ///
    /// # Errors
    ///
    /// A duration that is not one or is longer than its maximum ([`limits`]), or a
    /// `--parallelism` of 0 or more than [`limits::MAX_SWEEP_PARALLELISM`], or a
    /// `--brake-percent` over [`limits::MAX_SWEEP_BRAKE_PERCENT`].
    pub fn request(&self, cluster: &ClusterName) -> Result<SweepRequest, CliError> {
        let mut request = SweepRequest::new(cluster.clone());
        request.dry_run = self.dry_run;
        request.remediate = self.remediate;
        request.max_deletions = self.max_deletions;
        if self.parallelism == 0 {
            return Err(CliError::InvalidInput(
                "--parallelism: 0 would remove nothing; give at least 1 (default 5)".to_owned(),
            ));
        }
        if self.parallelism > limits::MAX_SWEEP_PARALLELISM {
            return Err(CliError::InvalidInput(format!(
                "--parallelism: {} is more than the maximum {}; give at most {} (default 5): ARM writes queue up beyond that",
                self.parallelism,
                limits::MAX_SWEEP_PARALLELISM,
                limits::MAX_SWEEP_PARALLELISM
            )));
        }
        request.parallelism = self.parallelism;
        if self.brake_percent > limits::MAX_SWEEP_BRAKE_PERCENT {
            return Err(CliError::InvalidInput(format!(
                "--brake-percent: {} is more than the maximum {}; give at most {} (default {}): a sweep must not remove half a cluster on a wrong listing",
                self.brake_percent,
                limits::MAX_SWEEP_BRAKE_PERCENT,
                limits::MAX_SWEEP_BRAKE_PERCENT,
                nodewright_model::sweep::brake::DEFAULT_BRAKE_PERCENT
            )));
        }
        request.brake_percent = self.brake_percent;
        if let Some(text) = &self.grace {
            request.grace = duration("--grace", text, limits::MAX_SWEEP_GRACE)?;
        }
        if let Some(text) = &self.health_timeout {
            request.health_timeout =
                duration("--health-timeout", text, limits::MAX_SWEEP_HEALTH_TIMEOUT)?;
        }
        if let Some(text) = &self.approval_timeout {
            request.approval_timeout =
                duration("--approval-timeout", text, limits::MAX_APPROVAL_TIMEOUT)?;
        }
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
            dry_run: false,
            remediate: false,
            max_deletions: 10,
            grace: None,
            health_timeout: None,
            approval_timeout: None,
            parallelism: 5,
            brake_percent: 20,
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
                    parallelism: 51,
                    ..flags()
                },
                "--parallelism: 51 is more than the maximum 50; give at most 50 (default 5): ARM writes queue up beyond that",
            ),
        ];
        for (typed, expected) in table {
            assert_eq!(&message(typed.request(&cluster())), expected);
        }
        let longest = SweepFlags {
            grace: Some("7days".to_owned()),
            health_timeout: Some("24h".to_owned()),
            approval_timeout: Some("1day".to_owned()),
            parallelism: 50,
            ..flags()
        };
        assert!(longest.request(&cluster()).is_ok());
        assert_eq!(every(Some("31days")).ok(), Some(limits::MAX_SWEEP_INTERVAL));
        assert_eq!(
            message(every(Some("32days"))),
            r#"--every: "32days" is longer than the maximum 744h; give at most 744h (e.g. 90s, 20m, 1h)"#
        );
    }

    #[test]
    fn the_interval_defaults_to_15m_and_is_at_least_1s() {
        assert_eq!(every(None).ok(), Some(Duration::from_secs(900)));
        assert_eq!(every(Some("1h")).ok(), Some(Duration::from_secs(3600)));
        assert_eq!(every(Some("1s")).ok(), Some(Duration::from_secs(1)));
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
            dry_run: true,
            remediate: true,
            max_deletions: 0,
            grace: Some("5m".to_owned()),
            health_timeout: Some("2m".to_owned()),
            approval_timeout: Some("30m".to_owned()),
            parallelism: 2,
            brake_percent: 35,
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
            parallelism: 0,
            ..flags()
        };
        assert_eq!(
            message(none_at_once.request(&cluster())),
            "--parallelism: 0 would remove nothing; give at least 1 (default 5)"
        );
        let half_and_more = SweepFlags {
            brake_percent: 51,
            ..flags()
        };
        assert_eq!(
            message(half_and_more.request(&cluster())),
            "--brake-percent: 51 is more than the maximum 50; give at most 50 (default 20): a sweep must not remove half a cluster on a wrong listing"
        );
        let ten = SweepFlags {
            brake_percent: 10,
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
