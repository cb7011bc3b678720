//! Validation of a parsed pool file: every rule, every problem at once, each with its fix.
//!
//! [`validate()`] walks the whole file and collects a [`FieldError`] for each value Azure,
//! Kubernetes or nodewright would refuse, named by its path in the file
//! (`spec.template.taints[1].effect`), so one run of the CLI shows everything to correct. Only a
//! file without problems becomes a [`ValidPool`]. The rules live beside the part of the file they
//! check: [`machine`] (the VM), [`kube`] (labels and taints), [`tags`] (Azure tags),
//! [`rollout`] (strategy, drain and timeouts), [`drain_rules`] (`spec.drain.rules`) and
//! [`health`] (`spec.health`, `spec.minReadySeconds`); [`azure`]
//! holds what Azure refuses when it builds the VM (an SSH key, premium storage for the size),
//! checked on the file only.

mod arm_id;
mod azure;
mod bootstrap;
mod drain_rules;
mod headroom;
mod health;
mod image_update;
mod kube;
mod machine;
mod rollout;
mod spot;
mod tags;

use std::fmt;

use super::hash::template_hash;
use super::spec::{API_VERSION, KIND, Pool};
use super::valid::ValidPool;
use crate::ClusterName;

pub use crate::limits::{MAX_POOL_NAME_LEN, MAX_REPLICAS};
use crate::scheduled_events::ScheduledEventsPolicy;

pub use super::field_error::FieldError;

/// A pool file with at least one [`FieldError`]. Never retryable: the file has to change.
///
/// It displays one problem per line, in the order of the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InvalidPool {
    /// Every problem found, in the order of the file; never empty.
    pub errors: Vec<FieldError>,
}

impl fmt::Display for InvalidPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.errors.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// Checks every rule on `pool` and, when all hold, returns the pool ready for workflows: its
/// durations parsed, its amounts resolved to [`super::Amount`]s and its template hashed.
///
/// # Errors
///
/// [`InvalidPool`] listing every value that breaks a rule.
pub fn validate(pool: &Pool) -> Result<ValidPool, InvalidPool> {
    let mut problems = Problems::default();
    if pool.api_version != API_VERSION {
        problems.push(
            "apiVersion",
            quoted(&pool.api_version),
            "is not a supported version",
            format!("write apiVersion: {API_VERSION}"),
        );
    }
    if pool.kind != KIND {
        problems.push(
            "kind",
            quoted(&pool.kind),
            "is not Pool",
            format!("write kind: {KIND}"),
        );
    }
    check_pool_name(&mut problems, "metadata.name", &pool.metadata.name);
    let spec = &pool.spec;
    if spec.replicas > MAX_REPLICAS {
        problems.push(
            "spec.replicas",
            spec.replicas.to_string(),
            "is more than 1000",
            "split the machines over several pools of at most 1000",
        );
    }
    machine::check(&mut problems, "spec.template", &spec.template);
    azure::check(&mut problems, "spec.template", &spec.template);
    let mut strategy = rollout::strategy(&mut problems, "spec.strategy", &spec.strategy);
    if let Some(seconds) = spec.min_ready_seconds {
        health::min_ready_seconds(
            &mut problems,
            "spec.minReadySeconds",
            seconds,
            &spec.strategy,
            &mut strategy,
        );
    }
    let health = health::health(&mut problems, "spec.health", spec.health.as_ref());
    let headroom = headroom::buffer(&mut problems, "spec.headroom", spec.headroom.as_ref());
    maintenance(&mut problems, "spec.maintenance", spec.maintenance.as_ref());
    let image_update = image_update::image_update(
        &mut problems,
        "spec.imageUpdate",
        spec.image_update.as_ref(),
        &spec.template,
    );
    let offering_ttl = offerings(&mut problems, "spec.offerings", spec.offerings.as_ref());
    let scheduled_events = ScheduledEventsPolicy::from_spec(
        crate::scheduled_events::SPEC_FIELD,
        spec.scheduled_events.as_ref(),
    )
    .unwrap_or_else(|found| {
        problems.0.extend(found);
        ScheduledEventsPolicy::default()
    });
    let drain = rollout::drain(&mut problems, "spec.drain", &spec.drain);
    let timeouts = rollout::timeouts(&mut problems, "spec.timeouts", &spec.timeouts);
    bootstrap::token(
        &mut problems,
        "spec.template",
        &spec.template,
        timeouts.creation,
        "spec.timeouts.creation",
    );
    if !problems.0.is_empty() {
        return Err(InvalidPool { errors: problems.0 });
    }
    Ok(ValidPool {
        name: pool.metadata.name.clone(),
        replicas: spec.replicas,
        template: spec.template.clone(),
        template_hash: template_hash(&spec.template),
        strategy,
        drain,
        timeouts,
        health,
        headroom,
        maintenance: spec.maintenance.clone(),
        image_update,
        offering_ttl,
        scheduled_events,
    })
}

/// `spec.offerings.unavailableFor` (at `field`), parsed and within its bounds.
fn offerings(
    problems: &mut Problems,
    field: &str,
    spec: Option<&super::spec::OfferingsSpec>,
) -> Option<std::time::Duration> {
    let written = spec?.unavailable_for.as_deref()?;
    let ttl_field = format!("{field}.unavailableFor");
    match humantime::parse_duration(written) {
        Err(error) => {
            problems.push(
                ttl_field,
                quoted(written),
                format!("is not a duration ({error})"),
                "write a duration such as \"1h\" or \"30m\"",
            );
            None
        }
        Ok(ttl) => match offering_ttl_problem(ttl) {
            Some(problem) => {
                problems.push(ttl_field, quoted(written), problem, OFFERING_TTL_FIX);
                None
            }
            None => Some(ttl),
        },
    }
}

const OFFERING_TTL_FIX: &str = "give an unavailableFor from 10s to 24h (default 1h)";

/// What is wrong with a parsed `unavailableFor`, if anything.
fn offering_ttl_problem(ttl: std::time::Duration) -> Option<&'static str> {
    if ttl < crate::limits::MIN_OFFERING_TTL {
        Some("is shorter than 10s")
    } else if ttl > crate::limits::MAX_OFFERING_TTL {
        Some("is longer than 24h")
    } else {
        None
    }
}

/// The rules of `spec.maintenance` (at `field`): every window's schedule, duration and time
/// zone (`crate::maintenance::validate`).
fn maintenance(
    problems: &mut Problems,
    field: &str,
    spec: Option<&crate::maintenance::MaintenanceSpec>,
) {
    if let Some(Err(found)) = spec.map(|spec| crate::maintenance::validate(field, spec)) {
        for problem in found {
            problems.push(problem.field, problem.value, problem.problem, problem.fix);
        }
    }
}

/// The pool name follows the cluster name's rules (a DNS label of at most 40 characters).
fn check_pool_name(problems: &mut Problems, field: &str, name: &str) {
    if let Err(invalid) = ClusterName::parse(field, name) {
        problems.push(
            field,
            quoted(name),
            invalid.problem,
            "use 1-40 lowercase letters, digits and '-', starting with a letter and not ending \
             with '-' (e.g. \"workers\"); machines are named <pool>-<5 characters>",
        );
    }
}

/// The pool file's rules applied to the values a workflow receives, already parsed: each
/// function returns the problems of one part of an input, named by its path in the input (`field`)
/// and with the pool file's fix. `crate::input` puts them together per workflow input.
pub(crate) mod received {
    use std::time::Duration;

    use super::{
        FieldError, Problems, bootstrap, check_pool_name, headroom, health, image_update, machine,
        rollout,
    };
    use crate::limits::MAX_REPLICAS;
    use crate::pool::spec::MachineTemplate;
    use crate::pool::valid::{DrainPolicy, ValidPool};
    use crate::scheduled_events::{MAX_DRAIN_MARGIN, MAX_IGNORE_BELOW};

    /// A pool name (at `field`), by the rules of `metadata.name`.
    pub(crate) fn pool_name(field: &str, name: &str) -> Vec<FieldError> {
        let mut problems = Problems::default();
        check_pool_name(&mut problems, field, name);
        problems.0
    }

    /// A machine template (at `field`), by the rules of `spec.template`, its bootstrap token
    /// checked against `creation` (the creation timeout, at `creation_field`).
    pub(crate) fn template(
        field: &str,
        template: &MachineTemplate,
        creation: Duration,
        creation_field: &str,
    ) -> Vec<FieldError> {
        let mut problems = Problems::default();
        machine::check(&mut problems, field, template);
        bootstrap::token(&mut problems, field, template, creation, creation_field);
        problems.0
    }

    /// Where a batch of machines goes (at `field`): VM size, subnet and zones by the rules of
    /// `spec.template`, and a headroom buffer by `spec.headroom`'s bounds (at `buffer_field`).
    pub(crate) fn placement(
        field: &str,
        question: &crate::headroom::HeadroomQuestion,
        buffer_field: &str,
        buffer: &crate::headroom::Buffer,
    ) -> Vec<FieldError> {
        let mut problems = Problems::default();
        machine::placement(
            &mut problems,
            field,
            &question.vm_size,
            &question.subnet_id,
            &question.zones,
        );
        headroom::parsed_buffer(&mut problems, buffer_field, buffer);
        problems.0
    }

    /// A creation timeout (at `field`), by the bounds of `spec.timeouts.creation`.
    pub(crate) fn creation_timeout(field: &str, value: Duration) -> Vec<FieldError> {
        let mut problems = Problems::default();
        rollout::parsed_creation_timeout(&mut problems, field, value);
        problems.0
    }

    /// A drain policy (at `field`), by the bounds of `spec.drain`.
    pub(crate) fn drain(field: &str, policy: &DrainPolicy) -> Vec<FieldError> {
        let mut problems = Problems::default();
        rollout::parsed_drain(&mut problems, field, policy);
        problems.0
    }

    /// A whole validated pool (at `field`), by every rule [`super::validate()`] applies.
    pub(crate) fn pool(field: &str, pool: &ValidPool) -> Vec<FieldError> {
        let mut problems = Problems::default();
        check_pool_name(&mut problems, &format!("{field}.name"), &pool.name);
        if pool.replicas > MAX_REPLICAS {
            problems.push(
                format!("{field}.replicas"),
                pool.replicas.to_string(),
                "is more than 1000",
                "split the machines over several pools of at most 1000",
            );
        }
        let template_field = format!("{field}.template");
        let events = &pool.scheduled_events;
        let rules = [
            ("drainMargin", Some(events.drain_margin), MAX_DRAIN_MARGIN),
            (
                "reboot.ignoreBelow",
                events.reboot.ignore_below,
                MAX_IGNORE_BELOW,
            ),
            (
                "freeze.ignoreBelow",
                events.freeze.ignore_below,
                MAX_IGNORE_BELOW,
            ),
        ];
        for (name, value, max) in rules {
            if let Some(value) = value.filter(|value| *value > max) {
                problems.push(
                    format!("{field}.scheduledEvents.{name}"),
                    format!("{}s", value.as_secs()),
                    format!("is longer than {}s", max.as_secs()),
                    "give a duration within the bounds of spec.scheduledEvents",
                );
            }
        }
        if let Some(problem) = pool.offering_ttl.and_then(super::offering_ttl_problem) {
            problems.push(
                format!("{field}.offeringTtl"),
                format!("{}s", pool.offering_ttl.map_or(0, |ttl| ttl.as_secs())),
                problem,
                super::OFFERING_TTL_FIX,
            );
        }
        machine::check(&mut problems, &template_field, &pool.template);
        rollout::parsed_strategy(&mut problems, &format!("{field}.strategy"), &pool.strategy);
        rollout::parsed_drain(&mut problems, &format!("{field}.drain"), &pool.drain);
        rollout::parsed_timeouts(&mut problems, &format!("{field}.timeouts"), &pool.timeouts);
        health::parsed_health(&mut problems, &format!("{field}.health"), &pool.health);
        headroom::parsed_buffer(&mut problems, &format!("{field}.headroom"), &pool.headroom);
        super::maintenance(
            &mut problems,
            &format!("{field}.maintenance"),
            pool.maintenance.as_ref(),
        );
        image_update::parsed(
            &mut problems,
            &format!("{field}.imageUpdate"),
            &pool.image_update,
        );
        bootstrap::token(
            &mut problems,
            &template_field,
            &pool.template,
            pool.timeouts.creation,
            &format!("{field}.timeouts.creation"),
        );
        problems.0
    }
}

/// The problems found so far.
#[derive(Debug, Default)]
struct Problems(Vec<FieldError>);

impl Problems {
    /// Records that `field` (holding `value`, already [`quoted`] if a string) has `problem`,
    /// fixed by `fix`.
    fn push(
        &mut self,
        field: impl Into<String>,
        value: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.0.push(FieldError {
            field: field.into(),
            value: value.into(),
            problem: problem.into(),
            fix: fix.into(),
        });
    }
}

/// The longest value shown in a message, in characters.
const MAX_SHOWN_CHARS: usize = 80;

/// `value` as it appears in a message: quoted and escaped, and cut after
/// [`MAX_SHOWN_CHARS`] characters.
fn quoted(value: &str) -> String {
    if value.chars().count() <= MAX_SHOWN_CHARS {
        crate::text::quoted(value)
    } else {
        let start: String = value.chars().take(MAX_SHOWN_CHARS).collect();
        format!("{}…", crate::text::quoted(&start))
    }
}

/// The path of the entry `key` of the map at `field`: `spec.template.labels["role"]` (a very
/// long key is shortened as by [`quoted`]).
fn entry(field: &str, key: &str) -> String {
    format!("{field}[{}]", quoted(key))
}

#[cfg(test)]
mod tests;
