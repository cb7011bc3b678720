//! The Helm chart `deploy/helm/nodewright` and the monitoring of `deploy/monitoring/`, checked
//! with the real tools `dev/install --test-tools` builds (helm, promtool; a missing one fails
//! the test, naming how to install it) and the worker's own catalogue of metrics:
//!
//! - `helm lint --strict` and `helm template` of the chart with its defaults and with every
//!   optional part on; the defaults render the plain manifests' RBAC (the same rights, checked
//!   object by object), configuration, pod spec and NetworkPolicy.
//! - The dashboard and the rules are one source: `deploy/monitoring/` holds byte-identical
//!   copies of the chart's `files/`.
//! - `promtool check rules` passes the PrometheusRule's rule groups, and a rules file holding
//!   every dashboard query as a recording rule (as Grafana sends it, variables filled in).
//! - Every series the dashboard and the rules read is one `nodewright-worker --list-metrics`
//!   prints (a histogram's `_bucket`, `_sum`, `_count`), `up`, or a Temporal SDK series of
//!   `nodewright_tests::monitoring::TEMPORAL_SERIES`; every label a matcher names is one of its
//!   labels. Needs the built worker (`cargo build --bins`, which `dev/test` runs first).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use nodewright_tests::binaries::{binary, output_within};
use nodewright_tests::deploy_objects::{self, CHART, Source, helm, helm_template, promtool, run};
use nodewright_tests::monitoring::{
    self, Expression, TEMPORAL_SERIES, as_sent_by_grafana, selectors,
};
use serde_json::{Value, json};

use super::{read, repo_root};

/// Every optional part of the chart on.
const EVERY_PART: [&str; 6] = [
    "--set",
    "serviceMonitor.enabled=true",
    "--set",
    "prometheusRule.enabled=true",
    "--set",
    "dashboard.enabled=true",
];

fn kinds(objects: &[Value]) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for object in objects {
        *kinds
            .entry(object["kind"].as_str().unwrap_or("?").to_owned())
            .or_insert(0) += 1;
    }
    kinds
}

fn rendered(args: &[&str]) -> Vec<Value> {
    let text = helm_template(args).unwrap_or_else(|error| panic!("{error:#}"));
    deploy_objects::documents(&text, "helm template").unwrap_or_else(|error| panic!("{error:#}"))
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn the_chart_lints_and_renders_with_its_defaults_and_every_optional_part() {
    let helm = helm().unwrap_or_else(|error| panic!("{error:#}"));
    let chart = repo_root().join(CHART);
    for args in [&[][..], &EVERY_PART[..]] {
        let printed = run(Command::new(&helm)
            .args(["lint", "--strict", "--namespace", "nodewright"])
            .arg(&chart)
            .args(args))
        .unwrap_or_else(|error| panic!("helm lint {args:?}: {error:#}"));
        assert!(
            printed.contains("0 chart(s) failed"),
            "helm lint {args:?}:\n{printed}"
        );
    }

    let defaults = kinds(&rendered(&[]));
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        assert!(!defaults.contains_key(kind), "{kind} is off by default");
    }
    let every = rendered(&EVERY_PART);
    let all = kinds(&every);
    for (kind, count) in [
        ("ServiceMonitor", 1),
        ("PrometheusRule", 1),
        ("Service", 1),
        ("Deployment", 1),
        ("ConfigMap", 2),
    ] {
        assert_eq!(
            all.get(kind),
            Some(&count),
            "{kind} with every part: {all:?}"
        );
    }
    let dashboard = find(&every, "ConfigMap", "nodewright-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let served: Value = serde_json::from_str(
        dashboard["data"]["nodewright.json"]
            .as_str()
            .expect("the dashboard's JSON"),
    )
    .expect("the ConfigMap holds the dashboard's JSON");
    assert_eq!(served, monitoring::dashboard().expect("the dashboard"));
    let rule = find(&every, "PrometheusRule", "nodewright");
    assert_eq!(
        rule["spec"]["groups"],
        monitoring::rule_groups().expect("the rules"),
        "the chart's PrometheusRule holds the rules of files/prometheusrule.yaml"
    );
    // The plain ServiceMonitor is the chart's.
    let plain = deploy_objects::documents(
        &read(&repo_root().join("deploy/monitoring/servicemonitor.yaml")),
        "deploy/monitoring/servicemonitor.yaml",
    )
    .expect("servicemonitor.yaml");
    assert_eq!(
        find(&every, "ServiceMonitor", "nodewright-worker")["spec"],
        plain[0]["spec"]
    );
}

#[test]
fn the_monitoring_files_are_copies_of_the_charts() {
    for file in ["dashboard.json", "prometheusrule.yaml"] {
        let chart = repo_root().join(CHART).join("files").join(file);
        let plain = repo_root().join("deploy/monitoring").join(file);
        assert!(
            read(&chart) == read(&plain),
            "deploy/monitoring/{file} differs from {CHART}/files/{file}: edit one and copy it \
             over the other (cp {CHART}/files/{file} deploy/monitoring/{file})"
        );
    }
}

#[test]
fn the_chart_grants_exactly_the_rbac_of_the_plain_manifests() {
    let [plain, chart] = Source::ALL.map(|source| {
        source
            .rbac()
            .unwrap_or_else(|error| panic!("{source:?}: {error:#}"))
    });
    assert!(
        plain.len() >= 9,
        "deploy/ has a ServiceAccount, a ClusterRole, three Roles and their bindings"
    );
    for (index, object) in plain.iter().enumerate() {
        assert_eq!(
            chart.get(index),
            Some(object),
            "the chart's RBAC differs from deploy/'s"
        );
    }
    assert_eq!(chart.len(), plain.len(), "the chart grants nothing more");
}

#[test]
fn the_chart_renders_the_plain_configuration_pod_and_network_policy() {
    let chart = Source::Chart.objects().expect("the chart");
    let plain = Source::Manifests.objects().expect("deploy/");
    let configuration =
        |objects: &[Value]| find(objects, "ConfigMap", "nodewright-worker")["data"].clone();
    assert_eq!(configuration(&chart), configuration(&plain));
    let pod = |objects: &[Value]| {
        let mut template =
            find(objects, "Deployment", "nodewright-worker")["spec"]["template"].clone();
        // The chart rolls the pods when its configuration changes.
        if let Some(annotations) = template["metadata"]["annotations"].as_object_mut() {
            annotations.remove("checksum/config");
        }
        template
    };
    assert_eq!(pod(&chart), pod(&plain));
    let policy =
        |objects: &[Value]| find(objects, "NetworkPolicy", "nodewright-worker")["spec"].clone();
    assert_eq!(policy(&chart), policy(&plain));
    let admission = |objects: &[Value]| {
        let mut policies = objects
            .iter()
            .filter(|o| {
                o["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("admissionregistration"))
            })
            .map(|o| json!([o["kind"], o["metadata"]["name"], o["spec"]]))
            .collect::<Vec<_>>();
        policies.sort_by_key(Value::to_string);
        policies
    };
    assert_eq!(admission(&chart), admission(&plain));
}

/// Runs `promtool check rules` on a rules file holding `groups`; its output.
fn check_rules(groups: &Value, name: &str) -> String {
    let promtool = promtool().unwrap_or_else(|error| panic!("{error:#}"));
    let dir = repo_root().join("target").join("tidy-monitoring");
    std::fs::create_dir_all(&dir).expect("target/tidy-monitoring");
    let path = dir.join(name);
    let text = serde_json::to_string_pretty(&json!({ "groups": groups })).expect("rules");
    std::fs::write(&path, text).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    run(Command::new(promtool).args(["check", "rules"]).arg(&path))
        .unwrap_or_else(|error| panic!("promtool check rules {}: {error:#}", path.display()))
}

#[test]
fn promtool_passes_the_alert_rules() {
    let groups = monitoring::rule_groups().expect("the rules");
    let printed = check_rules(&groups, "alerts.rules.json");
    assert!(printed.contains("SUCCESS"), "{printed}");
    let alerts: BTreeSet<String> = monitoring::rule_expressions()
        .expect("the rules")
        .into_iter()
        .map(|e| e.place)
        .collect();
    for alert in [
        "NodewrightRolloutStalled",
        "NodewrightRemediationShortCircuited",
        "NodewrightArmThrottled",
        "NodewrightSweepFrozen",
        "NodewrightWorkerDown",
    ] {
        assert!(
            alerts.contains(&format!("prometheusrule.yaml: {alert}")),
            "{alert} is among {alerts:?}"
        );
    }
    for group in groups.as_array().into_iter().flatten() {
        for rule in group["rules"].as_array().into_iter().flatten() {
            let alert = &rule["alert"];
            assert!(rule["for"].is_string(), "{alert} has `for`");
            assert!(rule["labels"]["severity"].is_string(), "{alert}: severity");
            for annotation in ["summary", "description", "runbook", "runbook_url"] {
                assert!(
                    rule["annotations"][annotation].is_string(),
                    "{alert}: annotation {annotation}"
                );
            }
        }
    }
}

#[test]
fn promtool_parses_every_dashboard_query() {
    let dashboard = monitoring::dashboard().expect("the dashboard");
    assert!(
        dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "schemaVersion 36 or newer"
    );
    let variables: Vec<&Value> = dashboard["templating"]["list"]
        .as_array()
        .expect("template variables")
        .iter()
        .collect();
    assert!(
        variables
            .iter()
            .any(|v| v["name"] == "datasource" && v["type"] == "datasource"),
        "a datasource variable"
    );
    assert!(
        variables.iter().any(|v| v["name"] == "pool"
            && v["definition"] == "label_values(nodewright_pool_replicas, pool)"),
        "a pool variable"
    );
    for panel in monitoring::all_panels(&dashboard) {
        if panel["type"] != "row" {
            assert_eq!(
                panel["datasource"]["uid"], "${datasource}",
                "panel {} reads the datasource variable",
                panel["title"]
            );
        }
    }
    let expressions = monitoring::dashboard_expressions().expect("the dashboard");
    assert!(expressions.len() >= 30, "{} queries", expressions.len());
    let rules: Vec<Value> = expressions
        .iter()
        .enumerate()
        .map(|(index, e)| json!({ "record": format!("dashboard:query_{index}"), "expr": as_sent_by_grafana(&e.text) }))
        .collect();
    let printed = check_rules(
        &json!([{ "name": "dashboard", "rules": rules }]),
        "dashboard.rules.json",
    );
    assert!(printed.contains("SUCCESS"), "{printed}");
}

/// The series `nodewright-worker --list-metrics` prints, each with its labels.
fn served_series() -> BTreeMap<String, BTreeSet<String>> {
    let series = catalogue(&listing());
    assert!(
        !series.is_empty(),
        "nodewright-worker --list-metrics printed no metric"
    );
    series
}

/// What `nodewright-worker --list-metrics` prints.
fn listing() -> String {
    let worker = binary("nodewright-worker").unwrap_or_else(|error| panic!("{error:#}"));
    let mut command = Command::new(&worker);
    command
        .arg("--list-metrics")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = output_within(command, Duration::from_secs(60))
        .unwrap_or_else(|error| panic!("{} --list-metrics: {error:#}", worker.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "nodewright-worker --list-metrics exited {}:\n{stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.into_owned()
}

/// The series of a `--list-metrics` listing (`name\ttype\tlabels\thelp` lines).
fn catalogue(listing: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut series = BTreeMap::new();
    for line in listing.lines().filter(|line| !line.trim().is_empty()) {
        let fields: Vec<&str> = line.split('\t').collect();
        assert!(
            fields.len() >= 3,
            "not name\\ttype\\tlabels\\thelp: {line:?}"
        );
        let labels: BTreeSet<String> = fields[2]
            .split(',')
            .map(str::trim)
            .filter(|label| !label.is_empty())
            .map(str::to_owned)
            .collect();
        let name = fields[0];
        match fields[1] {
            "histogram" => {
                let mut bucket = labels.clone();
                bucket.insert("le".to_owned());
                series.insert(format!("{name}_bucket"), bucket);
                series.insert(format!("{name}_sum"), labels.clone());
                series.insert(format!("{name}_count"), labels);
            }
            "counter" | "gauge" => {
                series.insert(name.to_owned(), labels);
            }
            other => panic!("{name}: type {other} is not counter, gauge or histogram"),
        }
    }
    series
}

/// The series and label problems of `expressions` against `served`.
fn unserved(
    expressions: &[Expression],
    served: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for expression in expressions {
        for selector in selectors(&as_sent_by_grafana(&expression.text)) {
            let name = selector.name.as_str();
            if name == "up" || TEMPORAL_SERIES.contains(&name) {
                continue;
            }
            match served.get(name) {
                None => problems.push(format!("{}: {name} is not served", expression.place)),
                Some(labels) => {
                    for label in selector.labels.iter().filter(|l| !labels.contains(*l)) {
                        problems.push(format!(
                            "{}: {name} has no label {label} (it has {labels:?})",
                            expression.place
                        ));
                    }
                }
            }
        }
    }
    problems
}

#[test]
fn every_series_the_dashboard_and_the_rules_read_is_served() {
    let served = served_series();
    let mut expressions = monitoring::dashboard_expressions().expect("the dashboard");
    expressions.extend(monitoring::rule_expressions().expect("the rules"));
    let problems = unserved(&expressions, &served);
    assert!(
        problems.is_empty(),
        "read a series of `nodewright-worker --list-metrics` (or up, or TEMPORAL_SERIES):\n  {}",
        problems.join("\n  ")
    );
    let read: BTreeSet<String> = expressions
        .iter()
        .flat_map(|e| monitoring::names(&selectors(&as_sent_by_grafana(&e.text))))
        .collect();
    assert!(read.len() >= 20, "the dashboard reads {read:?}");
}

#[test]
fn the_readme_lists_every_metric_with_its_labels() {
    let readme = read(&repo_root().join("README.md"));
    let mut missing = Vec::new();
    let listed = listing();
    let metrics = listed.lines().filter_map(|line| {
        let mut fields = line.split('\t');
        let name = fields.next()?;
        let labels = fields.nth(1)?;
        Some((name, labels.split(',').filter(|label| !label.is_empty())))
    });
    for (name, labels) in metrics {
        let row = readme
            .lines()
            .find(|line| line.starts_with(&format!("| `{name}` |")));
        match row {
            None => missing.push(format!("{name}: no row in README's metrics table")),
            Some(row) => {
                for label in labels {
                    if !row.contains(&format!("`{label}`")) {
                        missing.push(format!("{name}: its row does not name the label {label}"));
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "README.md → Metrics:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn a_series_or_label_the_worker_does_not_serve_is_named() {
    let served = catalogue(
        "nodewright_evictions_total\tcounter\tresult\tEvictions.\n\
         nodewright_drain_duration_seconds\thistogram\tpool,result\tDrains.\n",
    );
    let expressions = [
        r#"sum(rate(nodewright_evictions_total{result="evicted"}[5m]))"#,
        r#"histogram_quantile(0.5, sum by (le) (rate(nodewright_drain_duration_seconds_bucket{pool=~"$pool"}[5m])))"#,
        r#"nodewright_evictions{result="evicted"} + nodewright_evictions_total{reason="x"}"#,
        r#"up == 0 or temporal_workflow_failed"#,
    ]
    .map(|text| Expression {
        place: "here".to_owned(),
        text: text.to_owned(),
    });
    assert_eq!(
        unserved(&expressions, &served),
        [
            "here: nodewright_evictions is not served",
            r#"here: nodewright_evictions_total has no label reason (it has {"result"})"#,
        ]
    );
}

#[test]
fn the_chart_and_its_image_carry_the_workspace_version() {
    let chart: Value = serde_saphyr::from_str(&read(&repo_root().join(CHART).join("Chart.yaml")))
        .expect("Chart.yaml");
    let version = super::deploy::workspace_version();
    assert_eq!(
        chart["appVersion"],
        version.as_str(),
        "Chart.yaml appVersion"
    );
    assert_eq!(chart["version"], version.as_str(), "Chart.yaml version");
    assert_eq!(chart["apiVersion"], "v2");
    let rendered = rendered(&[]);
    let image = &find(&rendered, "Deployment", "nodewright-worker")["spec"]["template"]["spec"]["containers"]
        [0]["image"];
    assert_eq!(
        image,
        &json!(format!("ghcr.io/nodewright/nodewright:{version}"))
    );
    assert!(Path::new(&repo_root().join(CHART).join("values.yaml")).is_file());
}
