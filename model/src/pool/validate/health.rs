//! Rules for `spec.health` (when a machine is unhealthy and how it is remediated) and
//! `spec.minReadySeconds`; [`health`] returns the [`HealthPolicy`] the pool controller takes,
//! with the defaults for every key left out.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{Problems, quoted};
use crate::controller::{HealthPolicy, Rung, UnhealthyCondition};
use crate::limits::{self, short};
use crate::pool::amount::Amount;
use crate::pool::spec::{HealthSpec, IntOrPercent, Strategy, UnhealthyConditionSpec};
use crate::pool::valid::RolloutStrategy;

/// The longest condition type Kubernetes accepts: a qualified name (a 253-character prefix, `/`,
/// a 63-character name) = 316 characters.
const MAX_CONDITION_TYPE_LEN: usize = 316;

/// Checks `spec.health` (at `field`) and returns the policy; a key left out, or one with a
/// problem, takes its default.
pub(super) fn health(
    problems: &mut Problems,
    field: &str,
    spec: Option<&HealthSpec>,
) -> HealthPolicy {
    let defaults = HealthPolicy::default();
    let Some(spec) = spec else {
        return defaults;
    };
    let unhealthy_conditions = match &spec.unhealthy_conditions {
        None => defaults.unhealthy_conditions,
        Some(written) => conditions(problems, &format!("{field}.unhealthyConditions"), written),
    };
    let max_unhealthy = spec
        .max_unhealthy
        .as_ref()
        .map_or(defaults.max_unhealthy, |written| {
            max_unhealthy(problems, &format!("{field}.maxUnhealthy"), written)
                .unwrap_or(defaults.max_unhealthy)
        });
    let max_in_flight = spec
        .max_in_flight
        .map_or(defaults.max_in_flight, |written| {
            let max = limits::MAX_REMEDIATIONS_IN_FLIGHT;
            if (1..=max).contains(&written) {
                written
            } else {
                problems.push(
                    format!("{field}.maxInFlight"),
                    written.to_string(),
                    format!("is not from 1 to {max}"),
                    format!("give a number of remediations at once from 1 to {max} (default 1)"),
                );
                defaults.max_in_flight
            }
        });
    let lease_timeout = spec.lease_timeout.as_deref().map(|written| {
        duration(
            problems,
            &format!("{field}.leaseTimeout"),
            written,
            (limits::MIN_LEASE_TIMEOUT, limits::MAX_LEASE_TIMEOUT),
            "1m",
        )
    });
    let remediation = spec
        .remediation
        .as_ref()
        .map_or(defaults.remediation.clone(), |written| {
            ladder(problems, &format!("{field}.remediation"), written)
        });
    let remediation_timeout =
        spec.remediation_timeout
            .as_deref()
            .map_or(defaults.remediation_timeout, |written| {
                duration(
                    problems,
                    &format!("{field}.remediationTimeout"),
                    written,
                    (
                        limits::MIN_REMEDIATION_TIMEOUT,
                        limits::MAX_REMEDIATION_TIMEOUT,
                    ),
                    "10m",
                )
            });
    HealthPolicy {
        unhealthy_conditions,
        max_unhealthy,
        max_in_flight,
        lease_timeout,
        remediation,
        remediation_timeout,
    }
}

/// Checks `spec.minReadySeconds` (at `field`, holding `seconds`) and puts it into `strategy`,
/// where it overrides `spec.strategy.minReadySeconds`: at most [`limits::MAX_MIN_READY`], shorter
/// than the progress deadline, and not set beside a different non-zero
/// `spec.strategy.minReadySeconds` (0 there cannot be told from unset).
pub(super) fn min_ready_seconds(
    problems: &mut Problems,
    field: &str,
    seconds: u32,
    written_strategy: &Strategy,
    strategy: &mut RolloutStrategy,
) {
    let min_ready = Duration::from_secs(u64::from(seconds));
    let max = limits::MAX_MIN_READY;
    if min_ready > max {
        problems.push(
            field,
            seconds.to_string(),
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
        return;
    }
    if written_strategy.min_ready_seconds != 0 && written_strategy.min_ready_seconds != seconds {
        problems.push(
            field,
            seconds.to_string(),
            format!(
                "is set and so is spec.strategy.minReadySeconds ({}), with another value",
                written_strategy.min_ready_seconds
            ),
            "set only one of spec.minReadySeconds and spec.strategy.minReadySeconds",
        );
        return;
    }
    let deadline = strategy.progress_deadline;
    if !deadline.is_zero() && min_ready >= deadline {
        problems.push(
            field,
            seconds.to_string(),
            format!(
                "is not shorter than spec.strategy.progressDeadline {}: every rollout would stall \
                 before its first machine counts available",
                short(deadline)
            ),
            "make minReadySeconds shorter than progressDeadline, or progressDeadline longer",
        );
        return;
    }
    strategy.min_ready = min_ready;
}

/// Checks a health policy a workflow received (at `field`, e.g. `pool.health`) with the bounds of
/// `spec.health`. Field names are those of the input as it is serialized (`pool.health.maxInFlight`).
pub(super) fn parsed_health(problems: &mut Problems, field: &str, policy: &HealthPolicy) {
    if policy.unhealthy_conditions.len() > limits::MAX_UNHEALTHY_CONDITIONS {
        problems.push(
            format!("{field}.unhealthyConditions"),
            format!("{} conditions", policy.unhealthy_conditions.len()),
            format!("has more than {}", limits::MAX_UNHEALTHY_CONDITIONS),
            format!(
                "keep at most {} conditions",
                limits::MAX_UNHEALTHY_CONDITIONS
            ),
        );
    }
    for (index, condition) in policy.unhealthy_conditions.iter().enumerate() {
        let at = format!("{field}.unhealthyConditions[{index}]");
        condition_type(problems, &format!("{at}.type"), &condition.type_);
        condition_status(problems, &format!("{at}.status"), &condition.status);
        if condition.timeout > limits::MAX_UNHEALTHY_CONDITION_TIMEOUT {
            problems.push(
                format!("{at}.timeout"),
                format!("{}s", condition.timeout.as_secs()),
                format!(
                    "is longer than {}",
                    short(limits::MAX_UNHEALTHY_CONDITION_TIMEOUT)
                ),
                "give a duration from 0s to 24h",
            );
        }
    }
    if let Err(problem) = policy.max_unhealthy.check() {
        problems.push(
            format!("{field}.maxUnhealthy"),
            policy.max_unhealthy.to_string(),
            problem,
            "give a number of machines from 0 to 1000 or a percentage from 0% to 100% (default 40%)",
        );
    }
    let max = limits::MAX_REMEDIATIONS_IN_FLIGHT;
    if !(1..=max).contains(&policy.max_in_flight) {
        problems.push(
            format!("{field}.maxInFlight"),
            policy.max_in_flight.to_string(),
            format!("is not from 1 to {max}"),
            format!("give a number from 1 to {max} (default 1)"),
        );
    }
    if let Some(timeout) = policy.lease_timeout {
        parsed_bounds(
            problems,
            &format!("{field}.leaseTimeout"),
            timeout,
            (limits::MIN_LEASE_TIMEOUT, limits::MAX_LEASE_TIMEOUT),
        );
    }
    parsed_bounds(
        problems,
        &format!("{field}.remediationTimeout"),
        policy.remediation_timeout,
        (
            limits::MIN_REMEDIATION_TIMEOUT,
            limits::MAX_REMEDIATION_TIMEOUT,
        ),
    );
    if !is_ladder(&policy.remediation) {
        let written: Vec<&str> = policy.remediation.iter().map(|r| r.as_str()).collect();
        problems.push(
            format!("{field}.remediation"),
            format!("[{}]", written.join(", ")),
            "is not a ladder",
            LADDER_FIX,
        );
    }
}

const LADDER_FIX: &str = "list restart, redeploy and replace, each at most once and in that \
                          order, e.g. [restart, replace] (default [replace])";

/// Checks the conditions at `field` and returns those without a problem.
fn conditions(
    problems: &mut Problems,
    field: &str,
    written: &[UnhealthyConditionSpec],
) -> Vec<UnhealthyCondition> {
    let max = limits::MAX_UNHEALTHY_CONDITIONS;
    if written.len() > max {
        problems.push(
            field,
            format!("{} conditions", written.len()),
            format!("has more than {max}"),
            format!("keep at most {max} conditions; each is checked on every Node at every look"),
        );
    }
    let mut seen: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut parsed = Vec::new();
    for (index, condition) in written.iter().enumerate() {
        let at = format!("{field}[{index}]");
        let before = problems.0.len();
        condition_type(problems, &format!("{at}.type"), &condition.type_);
        condition_status(problems, &format!("{at}.status"), &condition.status);
        let timeout = duration_from_zero(problems, &format!("{at}.timeout"), &condition.timeout);
        if !seen.insert((&condition.type_, &condition.status)) {
            problems.push(
                at.clone(),
                format!(
                    "{{ type: {}, status: {} }}",
                    quoted(&condition.type_),
                    quoted(&condition.status)
                ),
                "repeats the type and status of an earlier condition",
                "keep one entry per type and status",
            );
        }
        if problems.0.len() == before {
            parsed.push(UnhealthyCondition {
                type_: condition.type_.clone(),
                status: condition.status.clone(),
                timeout,
            });
        }
    }
    parsed
}

/// A condition type: a Kubernetes qualified name (`Ready`, `example.com/DiskPressure`).
fn condition_type(problems: &mut Problems, field: &str, type_: &str) {
    let problem = if type_.is_empty() {
        Some("is empty".to_owned())
    } else if type_.len() > MAX_CONDITION_TYPE_LEN {
        Some(format!(
            "is longer than {MAX_CONDITION_TYPE_LEN} characters"
        ))
    } else if !is_qualified_name(type_) {
        Some("is not a condition type".to_owned())
    } else {
        None
    };
    if let Some(problem) = problem {
        problems.push(
            field,
            quoted(type_),
            problem,
            "write a Node condition type such as Ready or KernelDeadlock: letters, digits, '-', \
             '_' and '.', starting and ending with a letter or digit, with an optional DNS \
             prefix and '/'",
        );
    }
}

/// Whether `text` is `[prefix/]name`: the name 1-63 alphanumerics, `-`, `_` or `.`, starting and
/// ending alphanumeric; the prefix a DNS subdomain of at most 253 characters.
fn is_qualified_name(text: &str) -> bool {
    let (prefix, name) = match text.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, text),
    };
    let alnum_ends = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && alnum_ends(name)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|prefix| {
        !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && alnum_ends(label)
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    name_ok && prefix_ok
}

/// A condition status: exactly `True`, `False` or `Unknown`.
fn condition_status(problems: &mut Problems, field: &str, status: &str) {
    if !matches!(status, "True" | "False" | "Unknown") {
        problems.push(
            field,
            quoted(status),
            "is not a condition status",
            "write \"True\", \"False\" or \"Unknown\" (with that case)",
        );
    }
}

/// `maxUnhealthy`: a count from 0 to [`limits::MAX_BUDGET_COUNT`] or a percentage from 0% to 100%.
fn max_unhealthy(problems: &mut Problems, field: &str, written: &IntOrPercent) -> Option<Amount> {
    let parsed = match written {
        IntOrPercent::Count(count) => u32::try_from(*count).ok().map(Amount::Count),
        IntOrPercent::Text(text) => match text.strip_suffix('%') {
            Some(percent) => percent.parse::<u32>().ok().map(Amount::Percent),
            None => text.parse::<u32>().ok().map(Amount::Count),
        },
    }
    .filter(|amount| amount.check().is_ok());
    if parsed.is_none() {
        let shown = match written {
            IntOrPercent::Count(count) => count.to_string(),
            IntOrPercent::Text(text) => quoted(text),
        };
        problems.push(
            field,
            shown,
            "is not a number of machines from 0 to 1000 nor a percentage from 0% to 100%",
            "write a count (e.g. 2) or a percentage of the pool (e.g. \"40%\", the default); \
             above it nothing is remediated",
        );
    }
    parsed
}

/// The ladder at `field`: every entry a rung, each at most once, in the order restart, redeploy,
/// replace, and not empty. Returns the rungs read (the default `[replace]` when none is).
fn ladder(problems: &mut Problems, field: &str, written: &[String]) -> Vec<Rung> {
    if written.is_empty() {
        problems.push(field, "[]", "is empty", LADDER_FIX);
        return HealthPolicy::default().remediation;
    }
    let mut rungs = Vec::new();
    for (index, text) in written.iter().enumerate() {
        match Rung::parse(text) {
            None => problems.push(
                format!("{field}[{index}]"),
                quoted(text),
                "is not restart, redeploy or replace",
                LADDER_FIX,
            ),
            Some(rung) if rungs.last().is_some_and(|last| *last >= rung) => problems.push(
                format!("{field}[{index}]"),
                quoted(text),
                if rungs.contains(&rung) {
                    "repeats a rung"
                } else {
                    "comes after a later rung"
                },
                LADDER_FIX,
            ),
            Some(rung) => rungs.push(rung),
        }
    }
    if rungs.is_empty() {
        return HealthPolicy::default().remediation;
    }
    rungs
}

/// Whether `rungs` is a ladder: not empty, strictly in the order of [`Rung`].
fn is_ladder(rungs: &[Rung]) -> bool {
    !rungs.is_empty() && rungs.windows(2).all(|pair| pair[0] < pair[1])
}

/// A duration from `bounds.0` to `bounds.1` at `field`; zero (and a problem) otherwise.
fn duration(
    problems: &mut Problems,
    field: &str,
    written: &str,
    bounds: (Duration, Duration),
    example: &str,
) -> Duration {
    let problem = match humantime::parse_duration(written) {
        Err(error) => format!("is not a duration ({error})"),
        Ok(parsed) if parsed < bounds.0 => format!("is shorter than {}", short(bounds.0)),
        Ok(parsed) if parsed > bounds.1 => format!("is longer than {}", short(bounds.1)),
        Ok(parsed) => return parsed,
    };
    problems.push(
        field,
        quoted(written),
        problem,
        format!(
            "write a duration from {} to {} such as \"{example}\" (units: s, m, h)",
            short(bounds.0),
            short(bounds.1)
        ),
    );
    Duration::ZERO
}

/// A condition's timeout at `field`: from 0s to [`limits::MAX_UNHEALTHY_CONDITION_TIMEOUT`].
fn duration_from_zero(problems: &mut Problems, field: &str, written: &str) -> Duration {
    duration(
        problems,
        field,
        written,
        (Duration::ZERO, limits::MAX_UNHEALTHY_CONDITION_TIMEOUT),
        "5m",
    )
}

/// A parsed duration at `field` outside `bounds`: a problem.
fn parsed_bounds(
    problems: &mut Problems,
    field: &str,
    value: Duration,
    bounds: (Duration, Duration),
) {
    if value < bounds.0 || value > bounds.1 {
        problems.push(
            field,
            format!("{}s", value.as_secs()),
            format!("is not from {} to {}", short(bounds.0), short(bounds.1)),
            format!(
                "give a duration from {} to {}",
                short(bounds.0),
                short(bounds.1)
            ),
        );
    }
}
