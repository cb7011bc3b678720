//! Table tests of the input checks: one valid input of each workflow (as the CLI builds it from
//! `examples/pools/workers.yaml`), then one row per rule, each naming the field it expects.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::disruption::Disruption;
use crate::drain::{DrainPurpose, DrainRequest};
use crate::pool::{Amount, DrainPolicy, ValidPool, from_yaml};
use crate::rollout::{PoolHistory, TemplateRecord};

const WORKERS_YAML: &str = include_str!("../../../examples/pools/workers.yaml");

fn cluster(name: &str) -> ClusterName {
    ClusterName::parse("cluster", name).unwrap_or_else(|err| panic!("{err}"))
}

fn pool() -> ValidPool {
    from_yaml(WORKERS_YAML).unwrap_or_else(|err| panic!("{err}"))
}

fn create() -> CreateMachineRequest {
    let pool = pool();
    CreateMachineRequest {
        cluster: cluster("local"),
        pool: pool.name.clone(),
        machine: format!("{}-x7k2q", pool.name),
        template: pool.template.clone(),
        template_hash: pool.template_hash.clone(),
        creation_timeout: pool.timeouts.creation,
        keep_on_failure: false,
        drain: pool.drain.clone(),
        zone: None,
        capacity_type: None,
    }
}

fn delete() -> DeleteMachineRequest {
    DeleteMachineRequest {
        cluster: cluster("local"),
        machine: "workers-x7k2q".to_owned(),
        skip_drain: false,
        force: false,
        drain_policy: None,
        skip_hooks: false,
        hook_timeout: None,
        disruption: Disruption::Operator,
    }
}

fn drain() -> DrainRequest {
    DrainRequest {
        cluster: cluster("local"),
        node: "workers-x7k2q".to_owned(),
        purpose: DrainPurpose::Maintenance,
        policy: None,
        force: false,
        local_data: None,
        resume: None,
        disruption: Disruption::Operator,
        history_limit: None,
    }
}

fn rollout() -> RolloutRequest {
    RolloutRequest {
        cluster: cluster("local"),
        pool: pool(),
        canary: None,
        history: PoolHistory::default(),
        rollback: false,
        observe_interval: crate::rollout::DEFAULT_OBSERVE_INTERVAL,
        history_limit: crate::rollout::DEFAULT_HISTORY_LIMIT,
        resume: None,
        automatic: false,
    }
}

/// The fields `result` names, in order (empty when it passed).
fn fields(result: Result<(), InputError>) -> Vec<String> {
    match result {
        Ok(()) => Vec::new(),
        Err(error) => {
            let text = error.to_string();
            assert!(text.contains("refused its input"), "{text}");
            for problem in &error.errors {
                assert!(!problem.fix.is_empty(), "{problem}");
                assert!(text.contains(&problem.field), "{text}");
            }
            error.errors.into_iter().map(|e| e.field).collect()
        }
    }
}

/// One row of a table: the case, how it changes the valid input, the fields it expects named.
type Row<'a, T> = (&'a str, Box<dyn Fn(&mut T)>, &'a [&'a str]);

/// One row of the cluster table: the case, the input's cluster, the workflow ID, the worker's
/// cluster, and fragments the refusal holds (none: admitted).
type ClusterRow<'a> = (
    &'a str,
    &'a ClusterName,
    &'a str,
    Option<&'a ClusterName>,
    &'a [&'a str],
);

/// Checks a table of (case, input change, fields expected) with one `check_input`.
fn check<T: Clone>(
    base: T,
    check_input: impl Fn(&T) -> Result<(), InputError>,
    table: Vec<Row<'_, T>>,
) {
    assert_eq!(
        fields(check_input(&base)),
        Vec::<String>::new(),
        "the base input"
    );
    for (case, change, expected) in table {
        let mut input = base.clone();
        change(&mut input);
        assert_eq!(fields(check_input(&input)), expected, "{case}");
    }
}

fn policy(change: impl Fn(&mut DrainPolicy)) -> DrainPolicy {
    let mut policy = DrainPolicy::default();
    change(&mut policy);
    policy
}

#[test]
fn create_machine_inputs_follow_the_pool_file_rules() {
    check(
        create(),
        CreateMachineRequest::check,
        vec![
            (
                "a machine named by the CLI's --name passes",
                Box::new(|r| r.machine = "other-name".into()),
                &[],
            ),
            (
                "a creation timeout of 10^12 s is refused",
                Box::new(|r| r.creation_timeout = Duration::from_secs(1_000_000_000_000)),
                &["creationTimeout"],
            ),
            (
                "a creation timeout of 0 is refused",
                Box::new(|r| r.creation_timeout = Duration::ZERO),
                &["creationTimeout"],
            ),
            (
                "a VM size Azure does not name is refused",
                Box::new(|r| r.template.vm_size = "huge".into()),
                &["template.vmSize"],
            ),
            (
                "a pool name that is not a DNS label is refused",
                Box::new(|r| r.pool = "Workers!".into()),
                &["pool"],
            ),
            (
                "a machine name that is not a DNS label is refused",
                Box::new(|r| r.machine = "../etc".into()),
                &["machine"],
            ),
            (
                "a subnet that is not a subnet id is refused",
                Box::new(|r| r.template.subnet_id = "/subscriptions/x".into()),
                &["template.subnetId"],
            ),
            (
                "a control-plane role label is refused",
                Box::new(|r| {
                    r.template.labels.insert(
                        "node-role.kubernetes.io/control-plane".into(),
                        String::new(),
                    );
                }),
                &["template.labels[\"node-role.kubernetes.io/control-plane\"]"],
            ),
            (
                "a reserved tag is refused",
                Box::new(|r| {
                    r.template
                        .tags
                        .insert("nodewright.io-cluster".into(), "other".into());
                }),
                &["template.tags[\"nodewright.io-cluster\"]"],
            ),
            (
                "a template hash that is no label value is refused",
                Box::new(|r| r.template_hash = "Not A Hash".into()),
                &["templateHash"],
            ),
            (
                "a drain timeout beyond a day is refused",
                Box::new(|r| r.drain.timeout = Duration::from_secs(86_401)),
                &["drain.timeout"],
            ),
            (
                "a zero force-after-unhealthy is refused",
                Box::new(|r| r.drain.force_after_unhealthy = Duration::ZERO),
                &["drain.force_after_unhealthy"],
            ),
            (
                "a zone of the template passes",
                Box::new(|r| r.zone = Some("2".into())),
                &[],
            ),
            (
                "a zone the template does not name is refused",
                Box::new(|r| r.zone = Some("3".into())),
                &["zone"],
            ),
            (
                "a spot machine of an on-demand template is refused",
                Box::new(|r| r.capacity_type = Some(crate::pool::CapacityType::Spot)),
                &["capacityType"],
            ),
            (
                "an on-demand fallback of a spot-first template passes",
                Box::new(|r| {
                    r.template.capacity_types = vec![
                        crate::pool::CapacityType::Spot,
                        crate::pool::CapacityType::OnDemand,
                    ];
                    r.capacity_type = Some(crate::pool::CapacityType::OnDemand);
                }),
                &[],
            ),
            (
                "a zone for a template without zones is refused",
                Box::new(|r| {
                    r.template.zones.clear();
                    r.zone = Some("1".into());
                }),
                &["zone"],
            ),
            (
                "every problem is named at once",
                Box::new(|r| {
                    r.template.vm_size = "huge".into();
                    r.drain.pdb_retry_interval = Duration::from_secs(3600);
                }),
                &["template.vmSize", "drain.pdb_retry_interval"],
            ),
        ],
    );
}

#[test]
fn delete_uncordon_and_drain_inputs_name_a_machine_and_bounded_settings() {
    check(
        delete(),
        DeleteMachineRequest::check,
        vec![
            (
                "skip-drain and force are the operator's to choose",
                Box::new(|r| {
                    r.skip_drain = true;
                    r.force = true;
                }),
                &[],
            ),
            (
                "drain flags within bounds pass",
                Box::new(|r| {
                    r.drain_policy = Some(policy(|p| p.timeout = Duration::from_secs(60)))
                }),
                &[],
            ),
            (
                "a machine name with a slash is refused",
                Box::new(|r| r.machine = "a/b".into()),
                &["machine"],
            ),
            (
                "an empty machine name is refused",
                Box::new(|r| r.machine = String::new()),
                &["machine"],
            ),
            (
                "a volume detach timeout of a day is refused",
                Box::new(|r| {
                    r.drain_policy = Some(policy(|p| {
                        p.volume_detach_timeout = Duration::from_secs(86_400)
                    }))
                }),
                &["drainPolicy.volume_detach_timeout"],
            ),
            (
                "skip-hooks and a hook timeout of six hours pass",
                Box::new(|r| {
                    r.skip_hooks = true;
                    r.hook_timeout = Some(Duration::from_secs(6 * 3600));
                }),
                &[],
            ),
            (
                "a hook timeout of zero is refused",
                Box::new(|r| r.hook_timeout = Some(Duration::ZERO)),
                &["hookTimeout"],
            ),
            (
                "a hook timeout of a day is refused",
                Box::new(|r| r.hook_timeout = Some(Duration::from_secs(86_400))),
                &["hookTimeout"],
            ),
        ],
    );
    check(
        UncordonRequest {
            cluster: cluster("local"),
            machine: "workers-x7k2q".into(),
            force: false,
        },
        UncordonRequest::check,
        vec![(
            "an upper-case name is refused",
            Box::new(|r| r.machine = "Workers".into()),
            &["machine"],
        )],
    );
    check(
        drain(),
        DrainRequest::check,
        vec![
            (
                "a history limit of 150 passes",
                Box::new(|r| r.history_limit = Some(150)),
                &[],
            ),
            (
                "a history limit below 100 is refused",
                Box::new(|r| r.history_limit = Some(99)),
                &["historyLimit"],
            ),
            (
                "a history limit beyond 4000 is refused",
                Box::new(|r| r.history_limit = Some(4001)),
                &["historyLimit"],
            ),
            (
                "a deletion drain in force mode passes",
                Box::new(|r| {
                    r.purpose = DrainPurpose::Deletion;
                    r.force = true;
                }),
                &[],
            ),
            (
                "an absurd drain timeout is refused",
                Box::new(|r| {
                    r.policy = Some(policy(|p| p.timeout = Duration::from_secs(u64::MAX)))
                }),
                &["policy.timeout"],
            ),
            (
                "a zero pdb retry interval is refused",
                Box::new(|r| r.policy = Some(policy(|p| p.pdb_retry_interval = Duration::ZERO))),
                &["policy.pdb_retry_interval"],
            ),
            (
                "a node name of 64 characters is refused",
                Box::new(|r| r.node = "a".repeat(64)),
                &["node"],
            ),
        ],
    );
}

#[test]
fn rollout_inputs_follow_the_pool_file_rules_and_the_knobs_maxima() {
    check(
        rollout(),
        RolloutRequest::check,
        vec![
            (
                "a canary of one machine passes",
                Box::new(|r| r.canary = Some(1)),
                &[],
            ),
            (
                "a rollback to a recorded template passes",
                Box::new(|r| {
                    r.rollback = true;
                    r.history.previous = Some(TemplateRecord {
                        template_hash: r.pool.template_hash.clone(),
                        template: r.pool.template.clone(),
                    });
                }),
                &[],
            ),
            (
                "a max surge of 5000 machines is refused",
                Box::new(|r| r.pool.strategy.max_surge = Amount::Count(5000)),
                &["pool.strategy.max_surge"],
            ),
            (
                "a max unavailable of 150% is refused",
                Box::new(|r| r.pool.strategy.max_unavailable = Amount::Percent(150)),
                &["pool.strategy.max_unavailable"],
            ),
            (
                "a strategy that can replace nothing is refused",
                Box::new(|r| {
                    r.pool.strategy.max_surge = Amount::Count(0);
                    r.pool.strategy.max_unavailable = Amount::Percent(0);
                }),
                &["pool.strategy.max_surge"],
            ),
            (
                "zero max failures is refused",
                Box::new(|r| r.pool.strategy.max_failures = 0),
                &["pool.strategy.max_failures"],
            ),
            (
                "a week's progress deadline is refused",
                Box::new(|r| r.pool.strategy.progress_deadline = Duration::from_secs(7 * 86_400)),
                &["pool.strategy.progress_deadline"],
            ),
            (
                "a min_ready over an hour is refused",
                Box::new(|r| {
                    r.pool.strategy.progress_deadline = Duration::from_secs(2 * 3600);
                    r.pool.strategy.min_ready = Duration::from_secs(3601);
                }),
                &["pool.strategy.min_ready"],
            ),
            (
                "a min_ready as long as the progress deadline is refused",
                Box::new(|r| r.pool.strategy.min_ready = r.pool.strategy.progress_deadline),
                &["pool.strategy.min_ready"],
            ),
            (
                "more replicas than a pool may have are refused",
                Box::new(|r| r.pool.replicas = 1001),
                &["pool.replicas"],
            ),
            (
                "a canary beyond the replicas is refused",
                Box::new(|r| r.canary = Some(r.pool.replicas + 1)),
                &["canary"],
            ),
            (
                "a canary of zero is refused",
                Box::new(|r| r.canary = Some(0)),
                &["canary"],
            ),
            (
                "a bad image in the new template is refused",
                Box::new(|r| r.pool.template.image.publisher = None),
                &["pool.template.image.publisher"],
            ),
            (
                "a recorded template is only carried: it is checked when rolled back to, as the pool's",
                Box::new(|r| {
                    let mut template = r.pool.template.clone();
                    template.vm_size = "x".into();
                    r.history.previous = Some(TemplateRecord {
                        template_hash: "abc".into(),
                        template,
                    });
                }),
                &[],
            ),
            (
                "a health timeout of a year is refused",
                Box::new(|r| r.pool.timeouts.health = Duration::from_secs(365 * 86_400)),
                &["pool.timeouts.health"],
            ),
            (
                "an observe interval of a day is refused",
                Box::new(|r| r.observe_interval = Duration::from_secs(86_400)),
                &["observeInterval"],
            ),
            (
                "a history limit beyond 4000 is refused",
                Box::new(|r| r.history_limit = 4001),
                &["historyLimit"],
            ),
            (
                "a pool name with a slash is refused",
                Box::new(|r| r.pool.name = "a/b".into()),
                &["pool.name"],
            ),
        ],
    );
}

#[test]
fn controller_inputs_and_applied_pools_follow_the_pool_file_rules_and_the_knobs_maxima() {
    let base = crate::controller::ControllerRequest {
        cluster: cluster("local"),
        pool: pool(),
        paused: false,
        observe_interval: crate::controller::DEFAULT_OBSERVE_INTERVAL,
        history_limit: crate::controller::DEFAULT_HISTORY_LIMIT,
        carried: None,
    };
    check(
        base.clone(),
        crate::controller::ControllerRequest::check,
        vec![
            (
                "an observe interval of a day is refused",
                Box::new(|r| r.observe_interval = Duration::from_secs(86_400)),
                &["observeInterval"],
            ),
            (
                "a history limit of 0 is refused",
                Box::new(|r| r.history_limit = 0),
                &["historyLimit"],
            ),
            (
                "no remediation in flight is refused",
                Box::new(|r| r.pool.health.max_in_flight = 0),
                &["pool.health.maxInFlight"],
            ),
        ],
    );
    assert_eq!(fields(check_pool_update(&base.pool)), Vec::<String>::new());
    let mut wrong = base.pool;
    wrong.name = "a/b".into();
    assert_eq!(fields(check_pool_update(&wrong)), ["pool.name"]);
}

#[test]
fn inspect_and_sweep_inputs_follow_the_cli_bounds() {
    check(
        InspectPoolRequest {
            cluster: cluster("local"),
            pool: "workers".into(),
        },
        InspectPoolRequest::check,
        vec![(
            "a pool name of 41 characters is refused",
            Box::new(|r| r.pool = "a".repeat(41)),
            &["pool"],
        )],
    );
    check(
        SweepRequest::new(cluster("local")),
        SweepRequest::check,
        vec![
            (
                "a dry run that remediates passes",
                Box::new(|r| {
                    r.dry_run = true;
                    r.remediate = true;
                }),
                &[],
            ),
            (
                "the longest grace passes",
                Box::new(|r| r.grace = limits::MAX_SWEEP_GRACE),
                &[],
            ),
            (
                "a grace of zero is refused",
                Box::new(|r| r.grace = Duration::ZERO),
                &["grace"],
            ),
            (
                "a health timeout of a year is refused",
                Box::new(|r| r.health_timeout = Duration::from_secs(365 * 86_400)),
                &["healthTimeout"],
            ),
            (
                "an approval timeout of a week is refused",
                Box::new(|r| r.approval_timeout = Duration::from_secs(7 * 86_400)),
                &["approvalTimeout"],
            ),
            (
                "a parallelism of zero is refused",
                Box::new(|r| r.parallelism = 0),
                &["parallelism"],
            ),
            (
                "a parallelism of 51 is refused",
                Box::new(|r| r.parallelism = 51),
                &["parallelism"],
            ),
            (
                "a brake of 100% is refused",
                Box::new(|r| r.brake_percent = 100),
                &["brakePercent"],
            ),
        ],
    );
}

#[test]
fn an_input_for_another_cluster_is_refused() {
    let local = cluster("local");
    let other = cluster("other");
    let table: [ClusterRow<'_>; 7] = [
        (
            "the CLI's run on its own cluster's worker",
            &local,
            "delete/local/workers-x7k2q",
            Some(&local),
            &[],
        ),
        (
            "a run checked by its workflow ID only",
            &local,
            "delete/local/workers-x7k2q",
            None,
            &[],
        ),
        (
            "a scheduled sweep's run",
            &local,
            "sweep/local-2026-11-25T14:30:00Z",
            Some(&local),
            &[],
        ),
        (
            "an input naming another cluster than its ID",
            &other,
            "delete/local/workers-x7k2q",
            Some(&local),
            &[
                "\"other\"",
                "names (\"local\")",
                "this worker manages (\"local\"",
            ],
        ),
        (
            "another cluster's run on this cluster's queue",
            &other,
            "delete/other/workers-x7k2q",
            Some(&local),
            &["this worker manages (\"local\""],
        ),
        (
            "an ID nodewright does not build",
            &local,
            "my-delete",
            Some(&local),
            &["my-delete", "names no cluster"],
        ),
        (
            "another cluster's run checked by its ID only",
            &other,
            "delete/local/x",
            None,
            &["names (\"local\")"],
        ),
    ];
    for (case, input, workflow_id, worker, fragments) in table {
        match check_cluster("DeleteMachine", input, workflow_id, worker) {
            Ok(()) => assert!(fragments.is_empty(), "{case}: passed"),
            Err(error) => {
                let text = error.to_string();
                assert!(!fragments.is_empty(), "{case}: {text}");
                for fragment in fragments {
                    assert!(
                        text.contains(fragment),
                        "{case}: {fragment} missing in {text}"
                    );
                }
                assert!(error.errors.iter().all(|e| e.field == "cluster"), "{case}");
            }
        }
    }
}

proptest! {
    #[test]
    fn no_drain_duration_is_accepted_beyond_the_pool_files_maximum(seconds in 0u64..u64::MAX) {
        let value = Duration::from_secs(seconds);
        let mut request = delete();
        request.drain_policy = Some(policy(|p| p.timeout = value));
        let accepted = request.check().is_ok();
        prop_assert_eq!(accepted, seconds >= 1 && value <= limits::MAX_DRAIN_TIMEOUT);
    }

    #[test]
    fn no_creation_timeout_is_accepted_beyond_the_pool_files_maximum(seconds in 0u64..u64::MAX) {
        let mut request = create();
        request.creation_timeout = Duration::from_secs(seconds);
        // The example's bootstrap token (if any) must outlive the create; only check the bound.
        request.template.bootstrap_token = None;
        let accepted = request.check().is_ok();
        prop_assert_eq!(accepted, (10..=limits::MAX_CREATION_TIMEOUT.as_secs()).contains(&seconds));
    }
}

#[test]
fn an_input_for_another_machine_or_pool_than_its_workflow_id_is_refused() {
    let table: [(&str, &str, &str, Option<&str>); 6] = [
        (
            "the CLI's run",
            "workers-x7k2q",
            "delete/local/workers-x7k2q",
            None,
        ),
        (
            "a sweep's ID has no subject",
            "anything",
            "sweep/local",
            None,
        ),
        (
            "a scheduled sweep's ID has no subject",
            "anything",
            "sweep/local-2026-11-25T14:30:00Z",
            None,
        ),
        (
            "an ID nodewright does not build is left to check_cluster",
            "a",
            "my/own/id/x",
            None,
        ),
        (
            "a second run for the same machine under another ID",
            "workers-x7k2q",
            "delete/local/workers-other",
            Some(
                "is not the subject of the workflow ID delete/local/workers-other (\"workers-other\")",
            ),
        ),
        (
            "a rollout of another pool than its ID",
            "web",
            "rollout/local/workers",
            Some("(\"workers\")"),
        ),
    ];
    for (case, value, workflow_id, expected) in table {
        match (
            check_subject("DeleteMachine", "machine", value, workflow_id),
            expected,
        ) {
            (Ok(()), None) => {}
            (Err(error), Some(fragment)) => {
                let text = error.to_string();
                assert!(text.contains(fragment), "{case}: {text}");
                assert!(text.contains("machine: "), "{case}: {text}");
            }
            (result, _) => panic!(
                "{case}: {}",
                result.map_or_else(|e| e.to_string(), |()| "passed".to_owned())
            ),
        }
    }
}

#[test]
fn a_preflight_run_checks_each_pools_placement_and_bounds() {
    use crate::headroom::{Buffer, HeadroomQuestion};
    use crate::preflight::{MAX_PREFLIGHT_POOLS, PreflightPool};
    let valid = pool();
    let one = PreflightPool {
        pool: valid.name.clone(),
        replicas: valid.replicas,
        surge: 1,
        question: HeadroomQuestion {
            subnet_id: valid.template.subnet_id.clone(),
            vm_size: valid.template.vm_size.clone(),
            zones: valid.template.zones.clone(),
        },
        buffer: Buffer::default(),
    };
    let table: Vec<Row<'_, Vec<PreflightPool>>> = vec![
        (
            "no pools",
            Box::new(|p: &mut Vec<PreflightPool>| p.clear()),
            &[],
        ),
        (
            "a bad pool name",
            Box::new(|p| p[0].pool = "Not A Name".to_owned()),
            &["pools[0].pool"],
        ),
        (
            "too many replicas and surge",
            Box::new(|p| {
                p[0].replicas = 1001;
                p[0].surge = 5000;
            }),
            &["pools[0].replicas", "pools[0].surge"],
        ),
        (
            "a vnet id as subnet, a zone 4 and an empty size",
            Box::new(|p| {
                p[0].question.subnet_id =
                    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v".to_owned();
                p[0].question.zones = vec!["4".to_owned()];
                p[0].question.vm_size = String::new();
            }),
            &[
                "pools[0].question.vmSize",
                "pools[0].question.subnetId",
                "pools[0].question.zones[0]",
            ],
        ),
        (
            "a buffer past its bound",
            Box::new(|p| p[0].buffer.vcpus = 100_001),
            &["pools[0].headroom.buffer.vcpus"],
        ),
        (
            "more pools than a run checks",
            Box::new(move |p| {
                let first = p[0].clone();
                p.resize(MAX_PREFLIGHT_POOLS + 1, first);
            }),
            &["pools"],
        ),
    ];
    check(vec![one], |p| check_preflight_pools(p), table);
}
