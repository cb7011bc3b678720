//! Rules for how machines are replaced: the rollout strategy, drain settings and timeouts.
//!
//! Every duration goes through one helper, [`duration`], with bounds per field: the lower bounds
//! are low enough for tests to run short, the upper ones catch a unit typed wrong (`20h` for
//! `20m`).

use std::time::Duration;

use super::{Problems, quoted};
use crate::drain::LocalDataPolicy;
use crate::limits::{self, short};
use crate::pool::amount::Amount;
use crate::pool::spec::{DrainSettings, IntOrPercent, Strategy, Timeouts};
use crate::pool::valid::{DrainPolicy, MachineTimeouts, RolloutStrategy};

const SECOND: Duration = Duration::from_secs(1);

// The messages below say "1000" machines.
const _: () = assert!(limits::MAX_BUDGET_COUNT == 1000);

/// The shortest and longest value a duration field accepts.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    min: Duration,
    max: Duration,
}

const PROGRESS_DEADLINE: Bounds = Bounds {
    min: Duration::from_secs(10),
    max: limits::MAX_PROGRESS_DEADLINE,
};
const SOAK: Bounds = Bounds {
    min: SECOND,
    max: limits::MAX_SOAK,
};
const DRAIN_TIMEOUT: Bounds = Bounds {
    min: SECOND,
    max: limits::MAX_DRAIN_TIMEOUT,
};
const PDB_RETRY_INTERVAL: Bounds = Bounds {
    min: SECOND,
    max: limits::MAX_PDB_RETRY_INTERVAL,
};
const VOLUME_TIMEOUT: Bounds = Bounds {
    min: SECOND,
    max: limits::MAX_VOLUME_TIMEOUT,
};
const FORCE_AFTER_UNHEALTHY: Bounds = Bounds {
    min: SECOND,
    max: limits::MAX_FORCE_AFTER_UNHEALTHY,
};
const TERMINATION_GRACE_PERIOD: Bounds = Bounds {
    min: SECOND,
    max: limits::MAX_TERMINATION_GRACE_PERIOD,
};
/// Azure takes minutes to create a VM; tests use short values to exercise the timeout.
const CREATION_TIMEOUT: Bounds = Bounds {
    min: Duration::from_secs(10),
    max: limits::MAX_CREATION_TIMEOUT,
};
const HEALTH_TIMEOUT: Bounds = Bounds {
    min: Duration::from_secs(10),
    max: limits::MAX_HEALTH_TIMEOUT,
};

/// Checks `spec.strategy` and returns it parsed (with placeholders where it has problems).
pub(super) fn strategy(
    problems: &mut Problems,
    field: &str,
    strategy: &Strategy,
) -> RolloutStrategy {
    let max_surge = amount(problems, &format!("{field}.maxSurge"), &strategy.max_surge);
    let max_unavailable = amount(
        problems,
        &format!("{field}.maxUnavailable"),
        &strategy.max_unavailable,
    );
    if let (Some(surge), Some(unavailable)) = (max_surge, max_unavailable)
        && surge.is_zero()
        && unavailable.is_zero()
    {
        problems.push(
            format!("{field}.maxSurge"),
            written(&strategy.max_surge),
            "is zero and so is maxUnavailable: a rollout could never replace a machine",
            "set maxSurge to 1 (or maxUnavailable to 1 to replace machines in place)",
        );
    }
    if strategy.max_failures == 0 {
        problems.push(
            format!("{field}.maxFailures"),
            "0",
            "is zero: a rollout would pause before its first failure",
            "set maxFailures to at least 1 (default 3)",
        );
    } else if strategy.max_failures > limits::MAX_FAILURES {
        problems.push(
            format!("{field}.maxFailures"),
            strategy.max_failures.to_string(),
            format!(
                "is more than {}, one failure per machine of the largest pool",
                limits::MAX_FAILURES
            ),
            format!(
                "set maxFailures from 1 to {} (default 3)",
                limits::MAX_FAILURES
            ),
        );
    }
    let defaults = Strategy::default();
    let progress_deadline = duration(
        problems,
        &format!("{field}.progressDeadline"),
        &strategy.progress_deadline,
        PROGRESS_DEADLINE,
        &defaults.progress_deadline,
    );
    let min_ready = Duration::from_secs(u64::from(strategy.min_ready_seconds));
    min_ready_problems(
        problems,
        MinReadyNames {
            field: format!("{field}.minReadySeconds"),
            value: strategy.min_ready_seconds.to_string(),
            min_ready: "minReadySeconds",
            progress_deadline: "progressDeadline",
        },
        min_ready,
        progress_deadline,
    );
    let soak = strategy.soak.as_deref().map_or(Duration::ZERO, |written| {
        duration(problems, &format!("{field}.soak"), written, SOAK, "10m")
    });
    RolloutStrategy {
        max_surge: max_surge.unwrap_or(Amount::Count(0)),
        max_unavailable: max_unavailable.unwrap_or(Amount::Count(0)),
        max_failures: strategy.max_failures,
        progress_deadline,
        min_ready,
        soak,
    }
}

/// How the minReadySeconds checks name things: in the pool file (`minReadySeconds`) or in a
/// workflow's input (`min_ready`).
struct MinReadyNames {
    /// The field, e.g. `spec.strategy.minReadySeconds`.
    field: String,
    /// Its value as written.
    value: String,
    /// The field's own name in the fix.
    min_ready: &'static str,
    /// The progress deadline's name in the problem and the fix.
    progress_deadline: &'static str,
}

/// `minReadySeconds` is at most [`limits::MAX_MIN_READY`] and shorter than the progress deadline
/// (as a Deployment requires `progressDeadlineSeconds > minReadySeconds`); a progress deadline
/// that did not parse (zero) is not compared.
fn min_ready_problems(
    problems: &mut Problems,
    names: MinReadyNames,
    min_ready: Duration,
    progress_deadline: Duration,
) {
    let max = limits::MAX_MIN_READY;
    if min_ready > max {
        problems.push(
            names.field,
            names.value,
            format!(
                "is more than {} ({}): a machine would wait over an hour before it counts available",
                max.as_secs(),
                short(max)
            ),
            format!(
                "give a number of seconds from 0 to {} (0: available as soon as its Node is Ready)",
                max.as_secs()
            ),
        );
    } else if !progress_deadline.is_zero() && min_ready >= progress_deadline {
        problems.push(
            names.field,
            names.value,
            format!(
                "is not shorter than {} {}: every rollout would stall before its first machine counts available",
                names.progress_deadline,
                short(progress_deadline)
            ),
            format!(
                "make {} shorter than {}, or {} longer",
                names.min_ready, names.progress_deadline, names.progress_deadline
            ),
        );
    }
}

/// Checks `spec.drain` and returns it parsed.
pub(super) fn drain(problems: &mut Problems, field: &str, drain: &DrainSettings) -> DrainPolicy {
    let defaults = DrainSettings::default();
    let mut check = |name: &str, written: &str, bounds: Bounds, example: &str| {
        duration(
            problems,
            &format!("{field}.{name}"),
            written,
            bounds,
            example,
        )
    };
    let policy = DrainPolicy {
        timeout: check("timeout", &drain.timeout, DRAIN_TIMEOUT, &defaults.timeout),
        pdb_retry_interval: check(
            "pdbRetryInterval",
            &drain.pdb_retry_interval,
            PDB_RETRY_INTERVAL,
            &defaults.pdb_retry_interval,
        ),
        volume_detach_timeout: check(
            "volumeDetachTimeout",
            &drain.volume_detach_timeout,
            VOLUME_TIMEOUT,
            &defaults.volume_detach_timeout,
        ),
        volume_attach_timeout: check(
            "volumeAttachTimeout",
            &drain.volume_attach_timeout,
            VOLUME_TIMEOUT,
            &defaults.volume_attach_timeout,
        ),
        force_after_unhealthy: check(
            "forceAfterUnhealthy",
            &drain.force_after_unhealthy,
            FORCE_AFTER_UNHEALTHY,
            &defaults.force_after_unhealthy,
        ),
        local_data: local_data(problems, &format!("{field}.localData"), drain),
        rules: super::drain_rules::rules(problems, &format!("{field}.rules"), &drain.rules),
        termination_grace_period: drain.termination_grace_period.as_deref().map(|written| {
            duration(
                problems,
                &format!("{field}.terminationGracePeriod"),
                written,
                TERMINATION_GRACE_PERIOD,
                "48h",
            )
        }),
    };
    super::drain_rules::annotation_size(problems, &format!("{field}.rules"), &policy);
    policy
}

/// `localData`: `evict`, `refuse` or unset.
fn local_data(
    problems: &mut Problems,
    field: &str,
    drain: &DrainSettings,
) -> Option<LocalDataPolicy> {
    let written = drain.local_data.as_deref()?;
    let parsed = LocalDataPolicy::parse(written);
    if parsed.is_none() {
        problems.push(
            field,
            quoted(written),
            "is neither evict nor refuse",
            "write evict (pods with emptyDir volumes or without a controller are evicted and named in the drain's localDataLost) or refuse (the drain stops before its first eviction and names them), or leave it out: refuse for a maintenance drain, evict for a deletion",
        );
    }
    parsed
}

/// Checks `spec.timeouts` and returns them parsed.
///
/// A health timeout shorter than the creation timeout (as the defaults, 10m and 20m, the same
/// pair as Machine Controller Manager's) is accepted: the two bound different things. The
/// creation timeout bounds a create until its Node is Ready, and a machine a rollout is creating
/// is never judged unhealthy (`model::rollout::observed`); the health timeout bounds how long a
/// machine that is not being created may stay NotReady.
pub(super) fn timeouts(
    problems: &mut Problems,
    field: &str,
    timeouts: &Timeouts,
) -> MachineTimeouts {
    let defaults = Timeouts::default();
    MachineTimeouts {
        creation: duration(
            problems,
            &format!("{field}.creation"),
            &timeouts.creation,
            CREATION_TIMEOUT,
            &defaults.creation,
        ),
        health: duration(
            problems,
            &format!("{field}.health"),
            &timeouts.health,
            HEALTH_TIMEOUT,
            &defaults.health,
        ),
    }
}

/// A count from 0 to [`limits::MAX_BUDGET_COUNT`] or a percentage from 0% to 100%; `None` (and a
/// problem) otherwise.
fn amount(problems: &mut Problems, field: &str, value: &IntOrPercent) -> Option<Amount> {
    const FIX: &str = "write a number of machines from 0 to 1000 (e.g. 1) or a percentage from \"0%\" to \"100%\" (e.g. \"25%\")";
    let count = |count: u32| (count <= limits::MAX_BUDGET_COUNT).then_some(Amount::Count(count));
    let (parsed, problem) = match value {
        IntOrPercent::Count(count) if *count < 0 => (None, "is negative"),
        IntOrPercent::Count(written) => (
            u32::try_from(*written).ok().and_then(count),
            "is more than 1000 machines",
        ),
        IntOrPercent::Text(text) => match text.strip_suffix('%') {
            Some(percent) => (
                percent
                    .parse::<u32>()
                    .ok()
                    .filter(|percent| *percent <= 100)
                    .map(Amount::Percent),
                "is not a percentage from 0% to 100%",
            ),
            None => match text.parse::<u32>() {
                Ok(written) => (count(written), "is more than 1000 machines"),
                Err(_) => (None, "is neither a count nor a percentage"),
            },
        },
    };
    if parsed.is_none() {
        problems.push(field, written(value), problem, FIX);
    }
    parsed
}

/// An amount as written in the file.
fn written(value: &IntOrPercent) -> String {
    match value {
        IntOrPercent::Count(count) => count.to_string(),
        IntOrPercent::Text(text) => quoted(text),
    }
}

/// Parses the duration `written` at `field` (humantime syntax: `90s`, `20m`, `1h 30m`) and checks
/// it is within `bounds`; `example` (the field's default) goes into the fix. Returns
/// [`Duration::ZERO`] when there is a problem.
fn duration(
    problems: &mut Problems,
    field: &str,
    written: &str,
    bounds: Bounds,
    example: &str,
) -> Duration {
    let problem = match humantime::parse_duration(written) {
        Err(error) => format!("is not a duration ({error})"),
        Ok(parsed) => match bound_problem(parsed, bounds) {
            Some(problem) => problem,
            None => return parsed,
        },
    };
    problems.push(
        field,
        quoted(written),
        problem,
        duration_fix(bounds, example),
    );
    Duration::ZERO
}

/// What is wrong with `value` for a field of `bounds`, if anything.
fn bound_problem(value: Duration, bounds: Bounds) -> Option<String> {
    if value.is_zero() {
        Some("is zero".to_owned())
    } else if value < bounds.min {
        Some(format!("is shorter than {}", short(bounds.min)))
    } else if value > bounds.max {
        Some(format!("is longer than {}", short(bounds.max)))
    } else {
        None
    }
}

/// The fix of a duration out of `bounds`, with the field's default as `example`.
fn duration_fix(bounds: Bounds, example: &str) -> String {
    format!(
        "write a duration from {} to {} such as \"{example}\" (units: s, m, h)",
        short(bounds.min),
        short(bounds.max)
    )
}

/// Checks a duration a workflow received already parsed (at `field`, in seconds as its input
/// holds it) against the same `bounds` as the pool file's field.
fn parsed_duration(
    problems: &mut Problems,
    field: &str,
    value: Duration,
    bounds: Bounds,
    example: &str,
) {
    if let Some(problem) = bound_problem(value, bounds) {
        problems.push(
            field,
            format!("{}s", value.as_secs()),
            problem,
            duration_fix(bounds, example),
        );
    }
}

/// Checks a drain policy a workflow received (at `field`, e.g. `drain`) with the bounds of
/// `spec.drain`. Field names are those of the input (`drain.pdb_retry_interval`).
pub(super) fn parsed_drain(problems: &mut Problems, field: &str, policy: &DrainPolicy) {
    let defaults = DrainSettings::default();
    let mut check = |name: &str, value: Duration, bounds: Bounds, example: &str| {
        parsed_duration(problems, &format!("{field}.{name}"), value, bounds, example);
    };
    check("timeout", policy.timeout, DRAIN_TIMEOUT, &defaults.timeout);
    check(
        "pdb_retry_interval",
        policy.pdb_retry_interval,
        PDB_RETRY_INTERVAL,
        &defaults.pdb_retry_interval,
    );
    check(
        "volume_detach_timeout",
        policy.volume_detach_timeout,
        VOLUME_TIMEOUT,
        &defaults.volume_detach_timeout,
    );
    check(
        "volume_attach_timeout",
        policy.volume_attach_timeout,
        VOLUME_TIMEOUT,
        &defaults.volume_attach_timeout,
    );
    check(
        "force_after_unhealthy",
        policy.force_after_unhealthy,
        FORCE_AFTER_UNHEALTHY,
        &defaults.force_after_unhealthy,
    );
    if let Some(period) = policy.termination_grace_period {
        check(
            "termination_grace_period",
            period,
            TERMINATION_GRACE_PERIOD,
            "48h",
        );
    }
    super::drain_rules::received(problems, &format!("{field}.rules"), &policy.rules);
}

/// Checks a creation timeout a workflow received (at `field`) with the bounds of
/// `spec.timeouts.creation`.
pub(super) fn parsed_creation_timeout(problems: &mut Problems, field: &str, value: Duration) {
    let defaults = Timeouts::default();
    parsed_duration(problems, field, value, CREATION_TIMEOUT, &defaults.creation);
}

/// Checks timeouts a workflow received (at `field`, e.g. `pool.timeouts`) with the bounds of
/// `spec.timeouts`.
pub(super) fn parsed_timeouts(problems: &mut Problems, field: &str, timeouts: &MachineTimeouts) {
    let defaults = Timeouts::default();
    parsed_creation_timeout(problems, &format!("{field}.creation"), timeouts.creation);
    parsed_duration(
        problems,
        &format!("{field}.health"),
        timeouts.health,
        HEALTH_TIMEOUT,
        &defaults.health,
    );
}

/// Checks a strategy a workflow received (at `field`, e.g. `pool.strategy`) with the rules of
/// `spec.strategy`.
pub(super) fn parsed_strategy(problems: &mut Problems, field: &str, strategy: &RolloutStrategy) {
    for (name, amount) in [
        ("max_surge", strategy.max_surge),
        ("max_unavailable", strategy.max_unavailable),
    ] {
        if let Err(problem) = amount.check() {
            problems.push(
                format!("{field}.{name}"),
                amount.to_string(),
                problem,
                "write a number of machines from 0 to 1000 (e.g. 1) or a percentage from 0% to 100% (e.g. 25%)",
            );
        }
    }
    if strategy.max_surge.is_zero() && strategy.max_unavailable.is_zero() {
        problems.push(
            format!("{field}.max_surge"),
            strategy.max_surge.to_string(),
            "is zero and so is max_unavailable: a rollout could never replace a machine",
            "set max_surge to 1 (or max_unavailable to 1 to replace machines in place)",
        );
    }
    if strategy.max_failures == 0 || strategy.max_failures > limits::MAX_FAILURES {
        problems.push(
            format!("{field}.max_failures"),
            strategy.max_failures.to_string(),
            format!("is not from 1 to {}", limits::MAX_FAILURES),
            format!(
                "set max_failures from 1 to {} (default 3)",
                limits::MAX_FAILURES
            ),
        );
    }
    let defaults = Strategy::default();
    parsed_duration(
        problems,
        &format!("{field}.progress_deadline"),
        strategy.progress_deadline,
        PROGRESS_DEADLINE,
        &defaults.progress_deadline,
    );
    if strategy.soak > limits::MAX_SOAK {
        problems.push(
            format!("{field}.soak"),
            format!("{}s", strategy.soak.as_secs()),
            format!("is longer than {}", short(limits::MAX_SOAK)),
            duration_fix(SOAK, "10m"),
        );
    }
    min_ready_problems(
        problems,
        MinReadyNames {
            field: format!("{field}.min_ready"),
            value: format!("{}s", strategy.min_ready.as_secs()),
            min_ready: "min_ready",
            progress_deadline: "progress_deadline",
        },
        strategy.min_ready,
        strategy.progress_deadline,
    );
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn check_duration(written: &str, bounds: Bounds) -> Result<Duration, String> {
        let mut problems = Problems::default();
        let parsed = duration(&mut problems, "d", written, bounds, "1m");
        match problems.0.as_slice() {
            [] => Ok(parsed),
            [problem] => Err(problem.problem.clone()),
            more => panic!("several problems for one duration: {more:?}"),
        }
    }

    #[test]
    fn parses_durations_within_their_bounds() {
        let table: &[(&str, Result<Duration, &str>)] = &[
            ("90s", Ok(Duration::from_secs(90))),
            ("1h 30m", Ok(Duration::from_secs(5400))),
            ("10s", Ok(Duration::from_secs(10))),
            ("2h", Ok(Duration::from_secs(7200))),
            ("0s", Err("is zero")),
            ("9s", Err("is shorter than 10s")),
            ("2h 1s", Err("is longer than 2h")),
            ("20", Err("is not a duration")),
            ("", Err("is not a duration")),
            ("soon", Err("is not a duration")),
        ];
        for (written, expected) in table {
            let result = check_duration(written, CREATION_TIMEOUT);
            match (&result, expected) {
                (Ok(parsed), Ok(duration)) => assert_eq!(parsed, duration, "{written}"),
                (Err(problem), Err(start)) => {
                    assert!(problem.starts_with(start), "{written}: {problem}")
                }
                _ => panic!("{written}: got {result:?}, expected {expected:?}"),
            }
        }
    }

    fn amount_of(value: IntOrPercent) -> Option<Amount> {
        amount(&mut Problems::default(), "a", &value)
    }

    #[test]
    fn reads_counts_and_percentages() {
        let table = [
            (IntOrPercent::Count(0), Some(Amount::Count(0))),
            (IntOrPercent::Count(3), Some(Amount::Count(3))),
            (IntOrPercent::Count(-1), None),
            (IntOrPercent::Count(i64::MAX), None),
            (IntOrPercent::Count(1000), Some(Amount::Count(1000))),
            (IntOrPercent::Count(1001), None),
            (IntOrPercent::Text("1001".into()), None),
            (IntOrPercent::Text("25%".into()), Some(Amount::Percent(25))),
            (IntOrPercent::Text("0%".into()), Some(Amount::Percent(0))),
            (
                IntOrPercent::Text("100%".into()),
                Some(Amount::Percent(100)),
            ),
            (IntOrPercent::Text("101%".into()), None),
            (IntOrPercent::Text("-5%".into()), None),
            (IntOrPercent::Text("%".into()), None),
            (IntOrPercent::Text("4".into()), Some(Amount::Count(4))),
            (IntOrPercent::Text("four".into()), None),
        ];
        for (value, expected) in table {
            assert_eq!(amount_of(value.clone()), expected, "{value:?}");
        }
    }

    proptest! {
        #[test]
        fn every_whole_percentage_up_to_100_is_accepted(percent in 0u32..=200) {
            let parsed = amount_of(IntOrPercent::Text(format!("{percent}%")));
            prop_assert_eq!(parsed, (percent <= 100).then_some(Amount::Percent(percent)));
        }

        #[test]
        fn every_accepted_duration_is_within_its_bounds(seconds in 0u64..=10_000) {
            match check_duration(&format!("{seconds}s"), CREATION_TIMEOUT) {
                Ok(parsed) => {
                    prop_assert!(parsed >= CREATION_TIMEOUT.min && parsed <= CREATION_TIMEOUT.max);
                }
                Err(_) => prop_assert!(!(10..=7200).contains(&seconds)),
            }
        }
    }
}
