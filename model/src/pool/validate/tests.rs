//! Tests of [`validate()`]: one row per rule on top of the reference example, the example itself,
//! and every fixture in `tests/fixtures/invalid-pools`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::controller::{HealthPolicy, Rung, UnhealthyCondition};
use crate::image::ImageUpdatePolicy;
use crate::machine_name::MachineName;
use crate::pool::{
    Amount, BootstrapSecretRef, BootstrapTokenSpec, HealthSpec, ImageSource, ImageUpdateSpec,
    IntOrPercent, TaintSpec, UnhealthyConditionSpec, parse,
};

const WORKERS_YAML: &str = include_str!("../../../../examples/pools/workers.yaml");

fn workers() -> Pool {
    parse(WORKERS_YAML).unwrap_or_else(|err| panic!("{}", err.rendered))
}

fn valid(pool: &Pool) -> ValidPool {
    validate(pool).unwrap_or_else(|err| panic!("{err}"))
}

fn taint(key: &str, value: &str, effect: &str) -> TaintSpec {
    TaintSpec {
        key: key.to_owned(),
        value: value.to_owned(),
        effect: effect.to_owned(),
    }
}

/// Gives the example a minted token of `ttl` and `groups`, and an inline bootstrap that takes it.
/// Sets `spec.drain.rules` from YAML (a list of rules as the pool file writes them).
fn with_rules(pool: &mut Pool, yaml: &str) {
    pool.spec.drain.rules = serde_saphyr::from_str(yaml).unwrap_or_default();
    assert!(
        !pool.spec.drain.rules.is_empty(),
        "rules in the test are YAML: {yaml}"
    );
}

fn window(
    schedule: &str,
    duration: &str,
    zone: Option<&str>,
) -> crate::maintenance::MaintenanceSpec {
    crate::maintenance::MaintenanceSpec {
        apply_to: crate::maintenance::ApplyTo::All,
        windows: vec![crate::maintenance::WindowSpec {
            schedule: schedule.to_owned(),
            duration: duration.to_owned(),
            time_zone: zone.map(str::to_owned),
        }],
    }
}

fn headroom(addresses: Option<u32>, vcpus: Option<u32>) -> crate::pool::spec::HeadroomSpec {
    crate::pool::spec::HeadroomSpec {
        buffer: Some(crate::pool::spec::HeadroomBufferSpec { addresses, vcpus }),
    }
}

fn condition(type_: &str, status: &str, timeout: &str) -> UnhealthyConditionSpec {
    UnhealthyConditionSpec {
        type_: type_.to_owned(),
        status: status.to_owned(),
        timeout: timeout.to_owned(),
    }
}

/// The `spec.health` of the issue, every key written.
fn documented_health() -> HealthSpec {
    HealthSpec {
        unhealthy_conditions: Some(vec![
            condition("Ready", "False", "5m"),
            condition("Ready", "Unknown", "5m"),
            condition("KernelDeadlock", "True", "0s"),
        ]),
        max_unhealthy: Some(IntOrPercent::Text("40%".into())),
        max_in_flight: Some(1),
        lease_timeout: Some("1m".into()),
        remediation: Some(vec!["restart".into(), "replace".into()]),
        remediation_timeout: Some("10m".into()),
    }
}

/// Gives the example a health section whose second condition is `type_=status` for `timeout`.
fn with_condition(pool: &mut Pool, type_: &str, status: &str, timeout: &str) {
    pool.spec.health = Some(HealthSpec {
        unhealthy_conditions: Some(vec![
            condition("Ready", "False", "5m"),
            condition(type_, status, timeout),
        ]),
        ..HealthSpec::default()
    });
}

/// Gives the example a health section changed by `change`.
fn with_health(pool: &mut Pool, change: fn(&mut HealthSpec)) {
    let mut health = HealthSpec::default();
    change(&mut health);
    pool.spec.health = Some(health);
}

fn with_token(pool: &mut Pool, ttl: &str, groups: &[&str]) {
    pool.spec.template.bootstrap_token = Some(BootstrapTokenSpec {
        ttl: ttl.to_owned(),
        extra_groups: groups.iter().map(|g| (*g).to_owned()).collect(),
    });
    pool.spec.template.bootstrap =
        Some("#!/bin/bash\nkubeadm join 10.0.0.4:6443 --token <<BOOTSTRAP_TOKEN>>\n".to_owned());
}

/// Applies `change` to the example and asserts validation reports exactly one problem, on
/// `field`, starting with `problem`; or no problem when `field` is empty.
fn check(case: &str, change: fn(&mut Pool), field: &str, problem: &str) {
    let mut pool = workers();
    change(&mut pool);
    match (validate(&pool), field) {
        (Ok(_), "") => {}
        (Ok(_), _) => panic!("{case}: accepted, expected {field}: {problem}"),
        (Err(invalid), "") => panic!("{case}: refused with {invalid}"),
        (Err(invalid), _) => {
            let [error] = invalid.errors.as_slice() else {
                panic!("{case}: expected one problem, got:\n{invalid}");
            };
            assert_eq!(error.field, field, "{case}: {error}");
            assert!(
                error.problem.starts_with(problem),
                "{case}: expected {problem:?}, got {error}"
            );
            assert!(!error.fix.is_empty(), "{case}: no fix in {error}");
        }
    }
}

/// A row of [`refuses_each_broken_rule_with_its_field`]: the case as a sentence, the change to the
/// example, and the field and problem expected (both empty when the change is valid).
type Case<'a> = (&'a str, fn(&mut Pool), &'a str, &'a str);

#[test]
fn refuses_each_broken_rule_with_its_field() {
    let long_tag_field = format!("spec.template.tags[{}]", quoted(&"t".repeat(513)));
    #[rustfmt::skip]
    let cases: &[Case] = &[
        ("the example is valid", |_| {}, "", ""),
        // apiVersion, kind, name, replicas.
        ("refuses another api version", |p| p.api_version = "nodewright.io/v1".into(), "apiVersion", "is not a supported version"),
        ("refuses another kind", |p| p.kind = "NodePool".into(), "kind", "is not Pool"),
        ("refuses an empty pool name", |p| p.metadata.name = String::new(), "metadata.name", "is empty"),
        ("refuses a pool name of 41 characters", |p| p.metadata.name = "w".repeat(41), "metadata.name", "is longer than 40 characters"),
        ("accepts a pool name of 40 characters", |p| p.metadata.name = "w".repeat(40), "", ""),
        ("refuses a pool name ending with a dash", |p| p.metadata.name = "workers-".into(), "metadata.name", "ends with '-'"),
        ("refuses a pool name with a dot", |p| p.metadata.name = "workers.a".into(), "metadata.name", "contains a character"),
        ("accepts 0 replicas", |p| p.spec.replicas = 0, "", ""),
        ("accepts 1000 replicas", |p| p.spec.replicas = 1000, "", ""),
        ("refuses 1001 replicas", |p| p.spec.replicas = 1001, "spec.replicas", "is more than 1000"),
        // vmSize.
        ("refuses a size without its family", |p| p.spec.template.vm_size = "D4s_v5".into(), "spec.template.vmSize", "is not an Azure VM size"),
        ("refuses a size with an empty part", |p| p.spec.template.vm_size = "Standard_D4s__v5".into(), "spec.template.vmSize", "is not an Azure VM size"),
        ("accepts a basic size", |p| { p.spec.template.vm_size = "Basic_A1".into(); p.spec.template.os_disk.storage_account_type = "Standard_LRS".into(); }, "", ""),
        ("refuses a size of 65 characters", |p| p.spec.template.vm_size = format!("Standard_{}", "D".repeat(56)), "spec.template.vmSize", "is longer than 64 characters"),
        // image.
        ("accepts a gallery image version", |p| p.spec.template.image = ImageSource { id: Some("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/ubuntu/versions/1.2.3".into()), ..ImageSource::default() }, "", ""),
        ("accepts a managed image in any case", |p| p.spec.template.image = ImageSource { id: Some("/subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/img/providers/microsoft.compute/images/ubuntu".into()), ..ImageSource::default() }, "", ""),
        ("accepts a community gallery image", |p| p.spec.template.image = ImageSource { id: Some("/CommunityGalleries/flatcar-23/Images/flatcar/Versions/4081.2.0".into()), ..ImageSource::default() }, "", ""),
        ("accepts a shared gallery image", |p| p.spec.template.image = ImageSource { id: Some("/SharedGalleries/0b1f-nodes/Images/ubuntu/Versions/1.0.0".into()), ..ImageSource::default() }, "", ""),
        ("refuses an image name instead of an id", |p| p.spec.template.image = ImageSource { id: Some("ubuntu".into()), ..ImageSource::default() }, "spec.template.image.id", "is not the ARM id of an image"),
        ("refuses an id and a marketplace reference", |p| p.spec.template.image.id = Some("/CommunityGalleries/g/Images/i/Versions/1".into()), "spec.template.image", "sets both id and a marketplace reference"),
        ("refuses no image", |p| p.spec.template.image = ImageSource::default(), "spec.template.image", "names no image"),
        // imageUpdate.
        ("accepts imageUpdate auto on latest", |p| p.spec.image_update = Some(ImageUpdateSpec { policy: Some(ImageUpdatePolicy::Auto), check_interval: Some("30m".into()) }), "", ""),
        ("accepts imageUpdate auto on a gallery image without a version", |p| { p.spec.template.image = ImageSource { id: Some("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/ubuntu".into()), ..ImageSource::default() }; p.spec.image_update = Some(ImageUpdateSpec { policy: Some(ImageUpdatePolicy::Auto), check_interval: None }); }, "", ""),
        ("refuses imageUpdate auto on a concrete version", |p| { p.spec.template.image.version = Some("24.04.202411030".into()); p.spec.image_update = Some(ImageUpdateSpec { policy: Some(ImageUpdatePolicy::Auto), check_interval: None }); }, "spec.imageUpdate.policy", "needs an image written without a concrete version"),
        ("accepts imageUpdate pinned on a concrete version", |p| { p.spec.template.image.version = Some("24.04.202411030".into()); p.spec.image_update = Some(ImageUpdateSpec { policy: Some(ImageUpdatePolicy::Pinned), check_interval: None }); }, "", ""),
        ("refuses a check interval of 5s", |p| p.spec.image_update = Some(ImageUpdateSpec { policy: None, check_interval: Some("5s".into()) }), "spec.imageUpdate.checkInterval", "is shorter than 10s"),
        ("refuses a check interval of 8 days", |p| p.spec.image_update = Some(ImageUpdateSpec { policy: None, check_interval: Some("8d".into()) }), "spec.imageUpdate.checkInterval", "is longer than 7d"),
        ("refuses a check interval that is no duration", |p| p.spec.image_update = Some(ImageUpdateSpec { policy: None, check_interval: Some("hourly".into()) }), "spec.imageUpdate.checkInterval", "is not a duration"),
        ("refuses a marketplace reference without its offer", |p| p.spec.template.image.offer = None, "spec.template.image.offer", "is missing"),
        ("refuses an empty marketplace version", |p| p.spec.template.image.version = Some(" ".into()), "spec.template.image.version", "is empty"),
        // osDisk.
        ("refuses an os disk of 29 GiB", |p| p.spec.template.os_disk.size_gb = Some(29), "spec.template.osDisk.sizeGB", "is outside 30-4095 GiB"),
        ("refuses an os disk of 4096 GiB", |p| p.spec.template.os_disk.size_gb = Some(4096), "spec.template.osDisk.sizeGB", "is outside 30-4095 GiB"),
        ("accepts the image's disk size", |p| p.spec.template.os_disk.size_gb = None, "", ""),
        ("refuses an unknown disk type", |p| p.spec.template.os_disk.storage_account_type = "premium_lrs".into(), "spec.template.osDisk.storageAccountType", "is not an OS disk storage type"),
        ("refuses premium ssd v2 for the os disk", |p| p.spec.template.os_disk.storage_account_type = "PremiumV2_LRS".into(), "spec.template.osDisk.storageAccountType", "is a data-disk type"),
        ("accepts a zone-redundant disk", |p| p.spec.template.os_disk.storage_account_type = "StandardSSD_ZRS".into(), "", ""),
        // What Azure refuses when it builds the VM (validate/azure.rs).
        ("refuses a premium disk on a size without premium storage", |p| p.spec.template.vm_size = "Standard_D2_v5".into(), "spec.template.osDisk.storageAccountType", "needs a VM size with premium storage, and Standard_D2_v5 has none"),
        ("refuses a zone-redundant premium disk on an A size", |p| { p.spec.template.vm_size = "Standard_A2_v2".into(); p.spec.template.os_disk.storage_account_type = "Premium_ZRS".into(); }, "spec.template.osDisk.storageAccountType", "needs a VM size with premium storage, and Standard_A2_v2 has none"),
        ("refuses the default premium disk on a basic size", |p| p.spec.template.vm_size = "Basic_A1".into(), "spec.template.osDisk.storageAccountType", "needs a VM size with premium storage"),
        ("accepts a standard ssd on a size without premium storage", |p| { p.spec.template.vm_size = "Standard_D2_v5".into(); p.spec.template.os_disk.storage_account_type = "StandardSSD_LRS".into(); }, "", ""),
        ("accepts a premium disk on an old DS size", |p| p.spec.template.vm_size = "Standard_DS2_v2".into(), "", ""),
        ("accepts a premium disk on a size of a family it does not know", |p| p.spec.template.vm_size = "Standard_M64".into(), "", ""),
        ("refuses a pool without an SSH key", |p| p.spec.template.ssh_public_key = None, "spec.template.sshPublicKey", "is missing: nodewright creates Linux VMs with password login disabled"),
        // subnetId.
        ("refuses a vnet id as subnet", |p| p.spec.template.subnet_id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v".into(), "spec.template.subnetId", "is not the ARM id of a subnet"),
        ("refuses a subnet id with a bad subscription", |p| p.spec.template.subnet_id = "/subscriptions/prod/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s".into(), "spec.template.subnetId", "is not the ARM id of a subnet"),
        // zones.
        ("refuses zone 0", |p| p.spec.template.zones = vec!["0".into()], "spec.template.zones[0]", "is not an availability zone"),
        ("refuses a repeated zone", |p| p.spec.template.zones = vec!["2".into(), "3".into(), "2".into()], "spec.template.zones[2]", "repeats a zone"),
        ("accepts no zones", |p| p.spec.template.zones.clear(), "", ""),
        // labels.
        ("accepts a prefixed label", |p| { p.spec.template.labels.insert("example.com/tier".into(), "batch".into()); }, "", ""),
        ("accepts a node-role label", |p| { p.spec.template.labels.insert("node-role.kubernetes.io/worker".into(), String::new()); }, "", ""),
        ("accepts a node.kubernetes.io label", |p| { p.spec.template.labels.insert("node.kubernetes.io/pool".into(), "a".into()); }, "", ""),
        ("refuses a label key with a space", |p| { p.spec.template.labels.insert("my role".into(), "x".into()); }, "spec.template.labels[\"my role\"]", "key is not a label key"),
        ("refuses a label value of 64 characters", |p| { p.spec.template.labels.insert("role".into(), "w".repeat(64)); }, "spec.template.labels[\"role\"]", "value is not a label value"),
        ("refuses a nodewright label", |p| { p.spec.template.labels.insert("nodewright.io/pool".into(), "x".into()); }, "spec.template.labels[\"nodewright.io/pool\"]", "key uses the prefix nodewright.io/"),
        ("refuses the control-plane role label", |p| { p.spec.template.labels.insert("node-role.kubernetes.io/control-plane".into(), String::new()); }, "spec.template.labels[\"node-role.kubernetes.io/control-plane\"]", "key claims the control-plane role"),
        ("refuses the old master role label", |p| { p.spec.template.labels.insert("node-role.kubernetes.io/master".into(), "true".into()); }, "spec.template.labels[\"node-role.kubernetes.io/master\"]", "key claims the control-plane role"),
        ("refuses a claimed instance type", |p| { p.spec.template.labels.insert("node.kubernetes.io/instance-type".into(), "Standard_E64s_v5".into()); }, "spec.template.labels[\"node.kubernetes.io/instance-type\"]", "key is set by Kubernetes and Azure"),
        ("accepts a control-plane taint key (it only keeps pods away)", |p| { p.spec.template.taints.push(taint("node-role.kubernetes.io/control-plane", "", "NoSchedule")); }, "", ""),
        ("refuses a kubernetes.io label", |p| { p.spec.template.labels.insert("topology.kubernetes.io/zone".into(), "1".into()); }, "spec.template.labels[\"topology.kubernetes.io/zone\"]", "key uses a prefix Kubernetes keeps"),
        ("refuses a k8s.io label", |p| { p.spec.template.labels.insert("k8s.io/x".into(), "1".into()); }, "spec.template.labels[\"k8s.io/x\"]", "key uses a prefix Kubernetes keeps"),
        // taints.
        ("accepts a taint with an empty value", |p| p.spec.template.taints = vec![taint("gpu", "", "NoExecute")], "", ""),
        ("refuses an unknown taint effect", |p| p.spec.template.taints = vec![taint("gpu", "", "NoSchedule"), taint("gpu", "", "Never")], "spec.template.taints[1].effect", "is not a taint effect"),
        ("refuses a bad taint key", |p| p.spec.template.taints = vec![taint("gpu:", "", "NoSchedule")], "spec.template.taints[0].key", "is not a label key"),
        ("refuses a bad taint value", |p| p.spec.template.taints = vec![taint("gpu", "a b", "NoSchedule")], "spec.template.taints[0].value", "is not a taint value"),
        ("refuses a repeated key and effect", |p| p.spec.template.taints = vec![taint("gpu", "a", "NoSchedule"), taint("gpu", "b", "NoSchedule")], "spec.template.taints[1]", "repeats the key and effect of spec.template.taints[0]"),
        ("accepts one key with two effects", |p| p.spec.template.taints = vec![taint("gpu", "a", "NoSchedule"), taint("gpu", "a", "NoExecute")], "", ""),
        ("refuses a nodewright taint", |p| p.spec.template.taints = vec![taint("nodewright.io/x", "", "NoSchedule")], "spec.template.taints[0].key", "uses the prefix nodewright.io/"),
        // tags.
        ("accepts 39 tags", |p| p.spec.template.tags = (0..39).map(|i| (format!("t{i}"), String::new())).collect(), "", ""),
        ("refuses 40 tags", |p| p.spec.template.tags = (0..40).map(|i| (format!("t{i}"), String::new())).collect(), "spec.template.tags", "has more than 39 tags"),
        ("refuses a tag name with a slash", |p| { p.spec.template.tags.insert("team/owner".into(), "x".into()); }, "spec.template.tags[\"team/owner\"]", "name contains '/'"),
        ("refuses a tag name with a percent sign", |p| { p.spec.template.tags.insert("cost%".into(), "x".into()); }, "spec.template.tags[\"cost%\"]", "name contains '%'"),
        ("refuses an empty tag name", |p| { p.spec.template.tags.insert(String::new(), "x".into()); }, "spec.template.tags[\"\"]", "name is empty"),
        ("refuses a tag name of 513 characters", |p| { p.spec.template.tags.insert("t".repeat(513), "x".into()); }, &long_tag_field, "name is longer than 512 characters"),
        ("refuses a tag value of 257 characters", |p| { p.spec.template.tags.insert("team".into(), "v".repeat(257)); }, "spec.template.tags[\"team\"]", "value is longer than 256 characters"),
        ("accepts a tag value of 256 characters", |p| { p.spec.template.tags.insert("team".into(), "v".repeat(256)); }, "", ""),
        ("refuses a nodewright tag in any case", |p| { p.spec.template.tags.insert("NodeWright.io-cluster".into(), "x".into()); }, "spec.template.tags[\"NodeWright.io-cluster\"]", "name uses the prefix nodewright.io-"),
        ("refuses tag names differing by case", |p| { p.spec.template.tags.insert("TEAM".into(), "x".into()); }, "spec.template.tags[\"team\"]", "name differs only in case from \"TEAM\""),
        // adminUsername, sshPublicKey, bootstrap.
        ("refuses root as admin", |p| p.spec.template.admin_username = "root".into(), "spec.template.adminUsername", "is a name Azure refuses"),
        ("refuses an admin name starting with a digit", |p| p.spec.template.admin_username = "1ops".into(), "spec.template.adminUsername", "is not a Linux user name"),
        ("refuses an empty admin name", |p| p.spec.template.admin_username = String::new(), "spec.template.adminUsername", "is empty"),
        ("refuses an admin name of 65 characters", |p| p.spec.template.admin_username = "o".repeat(65), "spec.template.adminUsername", "is longer than 64 characters"),
        ("accepts an ed25519 key", |p| p.spec.template.ssh_public_key = Some("ssh-ed25519 AAAAC3Nz me@host".into()), "", ""),
        ("accepts an ecdsa key", |p| p.spec.template.ssh_public_key = Some("ecdsa-sha2-nistp256 AAAAE2Vj me@host".into()), "", ""),
        ("refuses a dsa key", |p| p.spec.template.ssh_public_key = Some("ssh-dss AAAAB3Nz me@host".into()), "spec.template.sshPublicKey", "is not an OpenSSH public key"),
        ("accepts a bootstrap of 65535 bytes", |p| p.spec.template.bootstrap = Some("x".repeat(65_535)), "", ""),
        ("refuses a bootstrap of 65536 bytes", |p| p.spec.template.bootstrap = Some("x".repeat(65_536)), "spec.template.bootstrap", "is longer than 65,535 bytes"),
        // bootstrapToken.
        ("accepts a minted token with its placeholder in the bootstrap", |p| with_token(p, "30m", &[]), "", ""),
        ("accepts a token ttl equal to the creation timeout", |p| with_token(p, "20m", &["system:bootstrappers:kubeadm:default-node-token"]), "", ""),
        ("accepts a token filled into a bootstrap secret", |p| { with_token(p, "30m", &[]); p.spec.template.bootstrap = None; p.spec.template.bootstrap_secret_ref = Some(BootstrapSecretRef { namespace: "nodewright".into(), name: "workers-join".into(), key: "bootstrap".into() }); }, "", ""),
        ("refuses a token for an inline bootstrap without the placeholder", |p| { with_token(p, "30m", &[]); p.spec.template.bootstrap = Some("kubeadm join --token abcdef.0123456789abcdef".into()); }, "spec.template.bootstrap", "does not contain the placeholder <<BOOTSTRAP_TOKEN>>"),
        ("refuses a token without a bootstrap", |p| { with_token(p, "30m", &[]); p.spec.template.bootstrap = None; }, "spec.template.bootstrapToken", "is set, but the template has no bootstrap"),
        ("refuses a token ttl of 4 minutes", |p| { with_token(p, "4m", &[]); p.spec.timeouts.creation = "2m".into(); }, "spec.template.bootstrapToken.ttl", "is shorter than 5m"),
        ("refuses a token ttl over a day", |p| with_token(p, "25h", &[]), "spec.template.bootstrapToken.ttl", "is longer than 24h"),
        ("refuses a token ttl that is not a duration", |p| with_token(p, "soon", &[]), "spec.template.bootstrapToken.ttl", "is not a duration"),
        ("refuses a token ttl shorter than the creation timeout", |p| with_token(p, "15m", &[]), "spec.template.bootstrapToken.ttl", "is shorter than spec.timeouts.creation (20m)"),
        ("refuses a token group outside system:bootstrappers", |p| with_token(p, "30m", &["system:bootstrappers:ok", "system:masters"]), "spec.template.bootstrapToken.extraGroups[1]", "is not a bootstrap token group"),
        // strategy.
        ("accepts percentages", |p| { p.spec.strategy.max_surge = IntOrPercent::Text("25%".into()); p.spec.strategy.max_unavailable = IntOrPercent::Text("0%".into()); }, "", ""),
        ("refuses a surge of 101%", |p| p.spec.strategy.max_surge = IntOrPercent::Text("101%".into()), "spec.strategy.maxSurge", "is not a percentage from 0% to 100%"),
        ("refuses a negative unavailability", |p| p.spec.strategy.max_unavailable = IntOrPercent::Count(-1), "spec.strategy.maxUnavailable", "is negative"),
        ("refuses a word as surge", |p| p.spec.strategy.max_surge = IntOrPercent::Text("one".into()), "spec.strategy.maxSurge", "is neither a count nor a percentage"),
        ("refuses zero surge and zero unavailability", |p| p.spec.strategy.max_surge = IntOrPercent::Text("0%".into()), "spec.strategy.maxSurge", "is zero and so is maxUnavailable"),
        ("accepts zero surge with one unavailable", |p| { p.spec.strategy.max_surge = IntOrPercent::Count(0); p.spec.strategy.max_unavailable = IntOrPercent::Count(1); }, "", ""),
        ("refuses zero max failures", |p| p.spec.strategy.max_failures = 0, "spec.strategy.maxFailures", "is zero"),
        ("accepts 1000 max failures", |p| p.spec.strategy.max_failures = 1000, "", ""),
        ("refuses 1001 max failures", |p| p.spec.strategy.max_failures = 1001, "spec.strategy.maxFailures", "is more than 1000"),
        ("accepts a surge of 1000 machines", |p| p.spec.strategy.max_surge = IntOrPercent::Count(1000), "", ""),
        ("refuses a surge of 1001 machines", |p| p.spec.strategy.max_surge = IntOrPercent::Count(1001), "spec.strategy.maxSurge", "is more than 1000 machines"),
        ("refuses an unavailability of 2^32 machines", |p| p.spec.strategy.max_unavailable = IntOrPercent::Count(1 << 32), "spec.strategy.maxUnavailable", "is more than 1000 machines"),
        ("refuses a quoted surge of 5000", |p| p.spec.strategy.max_surge = IntOrPercent::Text("5000".into()), "spec.strategy.maxSurge", "is more than 1000 machines"),
        ("accepts a minReadySeconds of 40", |p| p.spec.strategy.min_ready_seconds = 40, "", ""),
        ("accepts a minReadySeconds of 3600 under a 2h progress deadline", |p| { p.spec.strategy.min_ready_seconds = 3600; p.spec.strategy.progress_deadline = "2h".into(); }, "", ""),
        ("refuses a minReadySeconds of 3601", |p| { p.spec.strategy.min_ready_seconds = 3601; p.spec.strategy.progress_deadline = "2h".into(); }, "spec.strategy.minReadySeconds", "is more than 3600 (1h)"),
        ("refuses a minReadySeconds as long as the progress deadline", |p| { p.spec.strategy.min_ready_seconds = 300; p.spec.strategy.progress_deadline = "5m".into(); }, "spec.strategy.minReadySeconds", "is not shorter than progressDeadline 5m"),
        ("refuses a minReadySeconds longer than the default progress deadline", |p| p.spec.strategy.min_ready_seconds = 1801, "spec.strategy.minReadySeconds", "is not shorter than progressDeadline 30m"),
        // durations.
        ("refuses a progress deadline without unit", |p| p.spec.strategy.progress_deadline = "30".into(), "spec.strategy.progressDeadline", "is not a duration"),
        ("refuses a drain timeout over a day", |p| p.spec.drain.timeout = "25h".into(), "spec.drain.timeout", "is longer than 24h"),
        ("refuses a drain timeout of a thousand years", |p| p.spec.drain.timeout = "1000years".into(), "spec.drain.timeout", "is longer than 24h"),
        ("refuses a drain timeout humantime cannot hold", |p| p.spec.drain.timeout = "99999999999999999999999s".into(), "spec.drain.timeout", "is not a duration"),
        ("accepts a drain timeout of exactly a day", |p| p.spec.drain.timeout = "24h".into(), "", ""),
        ("accepts a hard deadline of a week", |p| p.spec.drain.termination_grace_period = Some("168h".into()), "", ""),
        ("accepts a hard deadline shorter than the drain timeout", |p| p.spec.drain.termination_grace_period = Some("40s".into()), "", ""),
        ("refuses a hard deadline over a week", |p| p.spec.drain.termination_grace_period = Some("169h".into()), "spec.drain.terminationGracePeriod", "is longer than 168h"),
        ("refuses a hard deadline of zero", |p| p.spec.drain.termination_grace_period = Some("0s".into()), "spec.drain.terminationGracePeriod", "is zero"),
        ("refuses a hard deadline that is no duration", |p| p.spec.drain.termination_grace_period = Some("soon".into()), "spec.drain.terminationGracePeriod", "is not a duration"),
        ("refuses a pdb retry interval under a second", |p| p.spec.drain.pdb_retry_interval = "100ms".into(), "spec.drain.pdbRetryInterval", "is shorter than 1s"),
        ("refuses a pdb retry interval over 10 minutes", |p| p.spec.drain.pdb_retry_interval = "11m".into(), "spec.drain.pdbRetryInterval", "is longer than 10m"),
        ("refuses a zero detach timeout", |p| p.spec.drain.volume_detach_timeout = "0s".into(), "spec.drain.volumeDetachTimeout", "is zero"),
        ("refuses an attach timeout over an hour", |p| p.spec.drain.volume_attach_timeout = "61m".into(), "spec.drain.volumeAttachTimeout", "is longer than 1h"),
        ("refuses a negative force delay", |p| p.spec.drain.force_after_unhealthy = "-5m".into(), "spec.drain.forceAfterUnhealthy", "is not a duration"),
        // local data.
        ("accepts localData evict", |p| p.spec.drain.local_data = Some("evict".into()), "", ""),
        ("accepts localData refuse", |p| p.spec.drain.local_data = Some("refuse".into()), "", ""),
        ("refuses localData keep", |p| p.spec.drain.local_data = Some("keep".into()), "spec.drain.localData", "is neither evict nor refuse"),
        ("refuses localData Evict in capitals", |p| p.spec.drain.local_data = Some("Evict".into()), "spec.drain.localData", "is neither evict nor refuse"),
        ("refuses an empty localData", |p| p.spec.drain.local_data = Some(String::new()), "spec.drain.localData", "is neither evict nor refuse"),
        // drain rules.
        ("accepts Skip, WaitCompleted and ordered Drain rules", |p| with_rules(p, "[{selector: {podSelector: {matchLabels: {app: agent}}}, behavior: Skip}, {selector: {namespaceSelector: {matchExpressions: [{key: team, operator: In, values: [batch]}]}}, behavior: WaitCompleted}, {selector: {podSelector: {}}, behavior: Drain, order: -1000}, {selector: {podSelector: {matchExpressions: [{key: db, operator: Exists}]}}, behavior: Drain, order: 1000}]"), "", ""),
        ("refuses an unknown behavior", |p| with_rules(p, "[{selector: {podSelector: {}}, behavior: Drain}, {selector: {podSelector: {}}, behavior: Drain}, {selector: {podSelector: {}}, behavior: Evict}]"), "spec.drain.rules[2].behavior", "is not a drain behavior"),
        ("refuses a rule without behavior", |p| with_rules(p, "[{selector: {podSelector: {}}}]"), "spec.drain.rules[0].behavior", "is missing"),
        ("refuses an order on a Skip rule", |p| with_rules(p, "[{selector: {podSelector: {}}, behavior: Skip, order: 3}]"), "spec.drain.rules[0].order", "is set on a rule whose behavior is Skip"),
        ("refuses an order over 1000", |p| with_rules(p, "[{selector: {podSelector: {}}, behavior: Drain, order: 1001}]"), "spec.drain.rules[0].order", "is outside -1000..1000"),
        ("refuses an order of 2^40", |p| with_rules(p, "[{selector: {podSelector: {}}, behavior: Drain, order: 1099511627776}]"), "spec.drain.rules[0].order", "is outside -1000..1000"),
        ("refuses a rule without selectors", |p| with_rules(p, "[{selector: {}, behavior: Skip}]"), "spec.drain.rules[0].selector", "has neither podSelector nor namespaceSelector"),
        ("refuses an unknown operator", |p| with_rules(p, "[{selector: {podSelector: {matchExpressions: [{key: app, operator: Gt, values: ['1']}]}}, behavior: Skip}]"), "spec.drain.rules[0].selector.podSelector.matchExpressions[0].operator", "is not a selector operator"),
        ("refuses In without values", |p| with_rules(p, "[{selector: {podSelector: {matchExpressions: [{key: app, operator: In}]}}, behavior: Skip}]"), "spec.drain.rules[0].selector.podSelector.matchExpressions[0].values", "is empty for In"),
        ("refuses Exists with values", |p| with_rules(p, "[{selector: {podSelector: {matchExpressions: [{key: app, operator: Exists, values: [a]}]}}, behavior: Skip}]"), "spec.drain.rules[0].selector.podSelector.matchExpressions[0].values", "is set for Exists"),
        ("refuses a bad label key", |p| with_rules(p, "[{selector: {namespaceSelector: {matchLabels: {'-bad': x}}}, behavior: Skip}]"), "spec.drain.rules[0].selector.namespaceSelector.matchLabels[\"-bad\"]", "key is not a label key"),
        ("refuses a bad label value", |p| with_rules(p, "[{selector: {podSelector: {matchLabels: {app: 'a b'}}}, behavior: Skip}]"), "spec.drain.rules[0].selector.podSelector.matchLabels[\"app\"]", "value is not a label value"),
        ("refuses 33 rules", |p| p.spec.drain.rules = vec![crate::drain::DrainRuleSpec { behavior: Some("Skip".into()), ..Default::default() }; 33], "spec.drain.rules", "holds more than 32 rules"),
        ("accepts a creation timeout of 10s for tests", |p| p.spec.timeouts.creation = "10s".into(), "", ""),
        ("accepts a health timeout shorter than the creation timeout (each bounds its own phase)", |p| { p.spec.timeouts.creation = "1h".into(); p.spec.timeouts.health = "5m".into(); }, "", ""),
        ("refuses a creation timeout of 9s", |p| p.spec.timeouts.creation = "9s".into(), "spec.timeouts.creation", "is shorter than 10s"),
        ("refuses a creation timeout over 2h", |p| p.spec.timeouts.creation = "121m".into(), "spec.timeouts.creation", "is longer than 2h"),
        ("refuses an empty health timeout", |p| p.spec.timeouts.health = String::new(), "spec.timeouts.health", "is not a duration"),
        // spec.minReadySeconds.
        ("accepts spec.minReadySeconds alone", |p| p.spec.min_ready_seconds = Some(30), "", ""),
        ("accepts spec.minReadySeconds equal to the strategy's", |p| { p.spec.min_ready_seconds = Some(30); p.spec.strategy.min_ready_seconds = 30; }, "", ""),
        ("refuses spec.minReadySeconds beside another strategy value", |p| { p.spec.min_ready_seconds = Some(30); p.spec.strategy.min_ready_seconds = 40; }, "spec.minReadySeconds", "is set and so is spec.strategy.minReadySeconds (40), with another value"),
        ("refuses spec.minReadySeconds of 3601", |p| p.spec.min_ready_seconds = Some(3601), "spec.minReadySeconds", "is more than 3600 (1h)"),
        ("refuses spec.minReadySeconds as long as the progress deadline", |p| p.spec.min_ready_seconds = Some(1800), "spec.minReadySeconds", "is not shorter than spec.strategy.progressDeadline 30m"),
        // spec.health.
        ("accepts an empty health section", |p| p.spec.health = Some(HealthSpec::default()), "", ""),
        ("accepts the documented health section", |p| p.spec.health = Some(documented_health()), "", ""),
        ("accepts no unhealthy conditions", |p| p.spec.health = Some(HealthSpec { unhealthy_conditions: Some(Vec::new()), ..HealthSpec::default() }), "", ""),
        ("accepts a prefixed condition type", |p| with_condition(p, "example.com/GpuHealthy", "False", "1m"), "", ""),
        ("refuses an empty condition type", |p| with_condition(p, "", "True", "1m"), "spec.health.unhealthyConditions[1].type", "is empty"),
        ("refuses a condition type with a space", |p| with_condition(p, "Kernel Deadlock", "True", "1m"), "spec.health.unhealthyConditions[1].type", "is not a condition type"),
        ("refuses a condition type of 317 characters", |p| with_condition(p, &format!("{}/{}", "a".repeat(253), "b".repeat(63)).replacen('a', "aa", 1), "True", "1m"), "spec.health.unhealthyConditions[1].type", "is longer than 316 characters"),
        ("refuses a lowercase status", |p| with_condition(p, "Ready", "false", "1m"), "spec.health.unhealthyConditions[1].status", "is not a condition status"),
        ("refuses a negative condition timeout", |p| with_condition(p, "Ready", "Unknown", "-1m"), "spec.health.unhealthyConditions[1].timeout", "is not a duration"),
        ("accepts a condition timeout of 24h", |p| with_condition(p, "Ready", "Unknown", "24h"), "", ""),
        ("refuses a condition timeout over 24h", |p| with_condition(p, "Ready", "Unknown", "25h"), "spec.health.unhealthyConditions[1].timeout", "is longer than 24h"),
        ("refuses a repeated type and status", |p| with_condition(p, "Ready", "False", "1m"), "spec.health.unhealthyConditions[1]", "repeats the type and status of an earlier condition"),
        ("refuses 17 conditions", |p| p.spec.health = Some(HealthSpec { unhealthy_conditions: Some((0..17).map(|n| condition(&format!("C{n}"), "True", "0s")).collect()), ..HealthSpec::default() }), "spec.health.unhealthyConditions", "has more than 16"),
        ("accepts a maxUnhealthy count", |p| with_health(p, |h| h.max_unhealthy = Some(IntOrPercent::Count(2))), "", ""),
        ("refuses a maxUnhealthy of 101%", |p| with_health(p, |h| h.max_unhealthy = Some(IntOrPercent::Text("101%".into()))), "spec.health.maxUnhealthy", "is not a number of machines from 0 to 1000"),
        ("refuses a negative maxUnhealthy", |p| with_health(p, |h| h.max_unhealthy = Some(IntOrPercent::Count(-1))), "spec.health.maxUnhealthy", "is not a number of machines"),
        ("refuses a maxUnhealthy of 1001", |p| with_health(p, |h| h.max_unhealthy = Some(IntOrPercent::Count(1001))), "spec.health.maxUnhealthy", "is not a number of machines"),
        ("refuses maxInFlight 0", |p| with_health(p, |h| h.max_in_flight = Some(0)), "spec.health.maxInFlight", "is not from 1 to 100"),
        ("refuses maxInFlight 101", |p| with_health(p, |h| h.max_in_flight = Some(101)), "spec.health.maxInFlight", "is not from 1 to 100"),
        ("refuses a lease timeout of 9s", |p| with_health(p, |h| h.lease_timeout = Some("9s".into())), "spec.health.leaseTimeout", "is shorter than 10s"),
        ("refuses a lease timeout over an hour", |p| with_health(p, |h| h.lease_timeout = Some("61m".into())), "spec.health.leaseTimeout", "is longer than 1h"),
        ("refuses an empty ladder", |p| with_health(p, |h| h.remediation = Some(Vec::new())), "spec.health.remediation", "is empty"),
        ("refuses an unknown rung", |p| with_health(p, |h| h.remediation = Some(vec!["restart".into(), "reimage".into()])), "spec.health.remediation[1]", "is not restart, redeploy or replace"),
        ("refuses a repeated rung", |p| with_health(p, |h| h.remediation = Some(vec!["restart".into(), "restart".into()])), "spec.health.remediation[1]", "repeats a rung"),
        ("refuses rungs out of order", |p| with_health(p, |h| h.remediation = Some(vec!["replace".into(), "restart".into()])), "spec.health.remediation[1]", "comes after a later rung"),
        ("accepts the whole ladder", |p| with_health(p, |h| h.remediation = Some(vec!["restart".into(), "redeploy".into(), "replace".into()])), "", ""),
        ("refuses a remediation timeout of 59s", |p| with_health(p, |h| h.remediation_timeout = Some("59s".into())), "spec.health.remediationTimeout", "is shorter than 1m"),
        ("refuses a remediation timeout over 6h", |p| with_health(p, |h| h.remediation_timeout = Some("6h 1s".into())), "spec.health.remediationTimeout", "is longer than 6h"),
        ("accepts a soak of 10m", |p| p.spec.strategy.soak = Some("10m".into()), "", ""),
        ("refuses a soak over 24h", |p| p.spec.strategy.soak = Some("25h".into()), "spec.strategy.soak", "is longer than 24h"),
        ("refuses a soak that is not a duration", |p| p.spec.strategy.soak = Some("soon".into()), "spec.strategy.soak", "is not a duration"),
        ("accepts a maintenance window", |p| p.spec.maintenance = Some(window("0 2 * * 1-5", "4h", Some("Europe/Berlin"))), "", ""),
        ("refuses an unknown time zone", |p| p.spec.maintenance = Some(window("0 2 * * *", "4h", Some("Mars/Olympus"))), "spec.maintenance.windows[0].timeZone", ""),
        ("refuses a window of more than 7 days", |p| p.spec.maintenance = Some(window("0 2 * * *", "8d", None)), "spec.maintenance.windows[0].duration", ""),
        ("refuses a schedule that never opens", |p| p.spec.maintenance = Some(window("0 0 30 2 *", "1h", None)), "spec.maintenance.windows[0].schedule", ""),
        ("accepts a headroom buffer", |p| p.spec.headroom = Some(headroom(Some(2), Some(8))), "", ""),
        ("refuses a headroom buffer of more addresses than a /16 has", |p| p.spec.headroom = Some(headroom(Some(65_532), None)), "spec.headroom.buffer.addresses", "is more than 65531"),
        ("refuses a headroom buffer of more than 100000 vCPUs", |p| p.spec.headroom = Some(headroom(None, Some(100_001))), "spec.headroom.buffer.vcpus", "is more than 100000"),
    ];
    for (case, change, field, problem) in cases {
        check(case, *change, field, problem);
    }
}

#[test]
fn the_reference_example_is_valid_and_means_what_its_comments_say() {
    let pool = valid(&workers());
    assert_eq!(pool.name, "workers");
    assert_eq!(pool.replicas, 2);
    assert_eq!(pool.template.vm_size, "Standard_D2s_v5");
    assert_eq!(
        pool.template.image.offer.as_deref(),
        Some("ubuntu-24_04-lts")
    );
    assert_eq!(pool.template.os_disk.size_gb, Some(64));
    assert_eq!(pool.template.zones, ["1", "2"]);
    assert_eq!(
        pool.template.labels,
        BTreeMap::from([("role".to_owned(), "worker".to_owned())])
    );
    assert!(
        pool.template.taints.is_empty(),
        "later demos schedule any pod on it"
    );
    assert_eq!(
        pool.template.tags,
        BTreeMap::from([("team".to_owned(), "platform".to_owned())])
    );
    assert!(
        pool.template
            .bootstrap
            .as_deref()
            .is_some_and(|b| b.starts_with("#!/bin/bash\n"))
    );
    assert_eq!(pool.template_hash, template_hash(&pool.template));
    assert_eq!(pool.strategy.max_surge, Amount::Count(1));
    assert_eq!(pool.strategy.max_unavailable, Amount::Count(0));
    assert_eq!(pool.strategy.max_failures, 3);
    assert_eq!(
        pool.strategy.progress_deadline,
        Duration::from_secs(30 * 60)
    );
    assert_eq!(pool.drain.timeout, Duration::from_secs(2 * 3600));
    assert_eq!(pool.drain.pdb_retry_interval, Duration::from_secs(20));
    assert_eq!(pool.drain.volume_detach_timeout, Duration::from_secs(120));
    assert_eq!(pool.drain.volume_attach_timeout, Duration::from_secs(90));
    assert_eq!(pool.drain.force_after_unhealthy, Duration::from_secs(300));
    assert_eq!(
        pool.drain.local_data, None,
        "unset: the drain's purpose decides"
    );
    assert_eq!(pool.timeouts.creation, Duration::from_secs(20 * 60));
    assert_eq!(pool.timeouts.health, Duration::from_secs(10 * 60));
}

#[test]
fn the_headroom_buffer_reads_as_written_and_defaults_to_nothing() {
    assert_eq!(
        valid(&workers()).headroom,
        crate::headroom::Buffer::default()
    );
    let mut pool = workers();
    pool.spec.headroom = Some(headroom(Some(2), None));
    assert_eq!(
        valid(&pool).headroom,
        crate::headroom::Buffer {
            addresses: 2,
            vcpus: 0
        }
    );
}

#[test]
fn a_pool_without_health_gets_the_default_policy_and_min_ready_from_its_strategy() {
    let mut pool = workers();
    pool.spec.strategy.min_ready_seconds = 20;
    let parsed = valid(&pool);
    assert_eq!(parsed.health, HealthPolicy::default());
    assert_eq!(parsed.strategy.min_ready, Duration::from_secs(20));
    pool.spec.min_ready_seconds = Some(20);
    assert_eq!(valid(&pool).strategy.min_ready, Duration::from_secs(20));
    pool.spec.strategy.min_ready_seconds = 0;
    pool.spec.min_ready_seconds = Some(45);
    assert_eq!(
        valid(&pool).strategy.min_ready,
        Duration::from_secs(45),
        "spec.minReadySeconds wins over an unset strategy value"
    );
}

#[test]
fn the_documented_health_section_reads_as_written_from_yaml() {
    let yaml = WORKERS_YAML.replacen(
        "spec:\n",
        "spec:\n  minReadySeconds: 30\n  health:\n    unhealthyConditions:\n      - { type: Ready, status: \"False\", timeout: 5m }\n      - { type: Ready, status: Unknown, timeout: 5m }\n      - { type: KernelDeadlock, status: True, timeout: 0s }\n    maxUnhealthy: 40%\n    maxInFlight: 2\n    leaseTimeout: 1m\n    remediation: [restart, replace]\n    remediationTimeout: 15m\n",
        1,
    );
    let pool = valid(&parse(&yaml).unwrap_or_else(|err| panic!("{}", err.rendered)));
    let seconds = |s| Duration::from_secs(s);
    assert_eq!(
        pool.health,
        HealthPolicy {
            unhealthy_conditions: vec![
                UnhealthyCondition {
                    type_: "Ready".into(),
                    status: "False".into(),
                    timeout: seconds(300)
                },
                UnhealthyCondition {
                    type_: "Ready".into(),
                    status: "Unknown".into(),
                    timeout: seconds(300)
                },
                UnhealthyCondition {
                    type_: "KernelDeadlock".into(),
                    status: "True".into(),
                    timeout: seconds(0)
                },
            ],
            max_unhealthy: Amount::Percent(40),
            max_in_flight: 2,
            lease_timeout: Some(seconds(60)),
            remediation: vec![Rung::Restart, Rung::Replace],
            remediation_timeout: seconds(900),
        }
    );
    assert_eq!(pool.strategy.min_ready, seconds(30));
    assert_eq!(
        pool.template_hash,
        valid(&workers()).template_hash,
        "health and minReadySeconds are not in the template"
    );
    let unknown = WORKERS_YAML.replacen("spec:\n", "spec:\n  health:\n    maxUnhealty: 1\n", 1);
    let error = parse(&unknown).expect_err("an unknown key");
    assert!(error.message.contains("maxUnhealty"), "{}", error.message);
}

#[test]
fn the_commented_sections_of_the_example_are_valid() {
    let start = WORKERS_YAML
        .find("  # health:\n")
        .unwrap_or_else(|| panic!("the example documents spec.health"));
    let (before, block) = WORKERS_YAML.split_at(start);
    let uncommented: String = block
        .lines()
        .map(|line| match line.strip_prefix("  # ") {
            Some(rest)
                if rest.starts_with(' ')
                    || rest.starts_with("health:")
                    || rest.starts_with("minReadySeconds:")
                    || rest.starts_with("headroom:")
                    || rest.starts_with("maintenance:")
                    || rest.starts_with("imageUpdate:") =>
            {
                format!("  {rest}\n")
            }
            _ => format!("{line}\n"),
        })
        .collect();
    let pool = valid(
        &parse(&format!("{before}{uncommented}")).unwrap_or_else(|err| panic!("{}", err.rendered)),
    );
    assert_eq!(
        pool.health,
        HealthPolicy {
            lease_timeout: Some(Duration::from_secs(60)),
            ..HealthPolicy::default()
        }
    );
    assert_eq!(pool.strategy.min_ready, Duration::ZERO);
    assert_eq!(
        pool.headroom,
        crate::headroom::Buffer {
            addresses: 2,
            vcpus: 8
        },
        "the commented headroom section reads as written"
    );
    let maintenance = pool
        .maintenance
        .unwrap_or_else(|| panic!("the maintenance section"));
    assert_eq!(
        (maintenance.apply_to, maintenance.windows.len()),
        (crate::maintenance::ApplyTo::Automatic, 1)
    );
    assert_eq!(
        pool.image_update,
        crate::image::ImageUpdate {
            policy: ImageUpdatePolicy::Auto,
            check_interval: Duration::from_secs(3600),
        },
        "the commented imageUpdate section reads as written"
    );
}

#[test]
fn a_valid_pool_recorded_before_health_decodes_to_the_defaults() {
    let pool = valid(&workers());
    let mut json = serde_json::to_value(&pool).unwrap_or_else(|err| panic!("{err}"));
    let removed = json.as_object_mut().and_then(|o| o.remove("health"));
    assert!(removed.is_some());
    let back: ValidPool = serde_json::from_value(json).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(back.health, HealthPolicy::default());
    assert!(received::pool("pool", &back).is_empty());
    let mut broken = back;
    broken.health.max_in_flight = 0;
    broken.health.remediation = vec![Rung::Replace, Rung::Restart];
    let fields: Vec<String> = received::pool("pool", &broken)
        .into_iter()
        .map(|e| e.field)
        .collect();
    assert_eq!(
        fields,
        ["pool.health.maxInFlight", "pool.health.remediation"]
    );
}

#[test]
fn a_hard_deadline_reaches_the_drain_policy_and_its_tag() {
    let mut pool = workers();
    assert_eq!(valid(&pool).drain.termination_grace_period, None);
    pool.spec.drain.termination_grace_period = Some("48h".into());
    let policy = valid(&pool).drain;
    assert_eq!(
        policy.termination_grace_period,
        Some(Duration::from_secs(48 * 3600))
    );
    let tag = crate::drain::policy_to_tag(&policy);
    assert!(tag.ends_with(",terminationGracePeriod=172800"), "{tag}");
    assert_eq!(crate::drain::policy_from_tag(&tag), Ok(policy));
}

#[test]
fn valid_pool_round_trips_through_json() {
    let pool = valid(&workers());
    let json = serde_json::to_string(&pool).unwrap_or_else(|err| panic!("{err}"));
    let back: ValidPool = serde_json::from_str(&json).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(back, pool);
}

#[test]
fn template_hash_ignores_everything_outside_the_template() {
    let base = valid(&workers()).template_hash;
    let mut changed = workers();
    changed.spec.replicas = 7;
    changed.spec.strategy.max_surge = IntOrPercent::Text("50%".into());
    changed.spec.strategy.max_failures = 9;
    changed.spec.drain.timeout = "30m".into();
    changed.spec.timeouts.creation = "15m".into();
    assert_eq!(valid(&changed).template_hash, base);
    changed.spec.template.vm_size = "Standard_D4s_v5".into();
    assert_ne!(valid(&changed).template_hash, base);
}

#[test]
fn template_hash_is_the_same_whether_defaults_are_written_or_not() {
    let written = WORKERS_YAML.replace(
        "    # adminUsername: nodewright\n",
        "    adminUsername: nodewright\n",
    );
    assert_ne!(written, WORKERS_YAML);
    let from_written = valid(&parse(&written).unwrap_or_else(|err| panic!("{err}")));
    assert_eq!(from_written.template_hash, valid(&workers()).template_hash);
}

#[test]
fn collects_every_problem_in_file_order_one_per_line() {
    let mut pool = workers();
    pool.kind = "Pools".into();
    pool.spec.template.vm_size = "big".into();
    pool.spec.template.taints = vec![taint("gpu", "", "Sometimes")];
    pool.spec.timeouts.health = "1d 1s".into();
    let invalid = validate(&pool).err().unwrap_or_else(|| panic!("accepted"));
    let fields: Vec<&str> = invalid.errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "kind",
            "spec.template.vmSize",
            "spec.template.taints[0].effect",
            "spec.timeouts.health",
        ]
    );
    let message = invalid.to_string();
    assert_eq!(message.lines().count(), 4, "{message}");
    assert_eq!(
        message.lines().nth(1),
        Some(
            "spec.template.vmSize: is not an Azure VM size (got \"big\"); write the size as \
             Azure names it, Standard_<size> or Basic_<size> (e.g. Standard_D4s_v5)"
        )
    );
    assert!(
        message.contains(
            "spec.template.taints[0].effect: is not a taint effect (got \"Sometimes\"); use one of \
             NoSchedule, PreferNoSchedule, NoExecute"
        ),
        "{message}"
    );
}

#[test]
fn shortens_long_values_in_messages() {
    let mut pool = workers();
    pool.spec.template.ssh_public_key = Some("k".repeat(500));
    let message = validate(&pool)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        message.contains(&format!("(got \"{}\"…)", "k".repeat(80))),
        "{message}"
    );
    assert!(message.len() < 400, "{message}");
}

/// `tests/fixtures/invalid-pools/<rule>.yaml`: each starts with `# expect: <substring>`.
fn fixtures() -> Vec<(PathBuf, String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/invalid-pools");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
    let mut found = Vec::new();
    for entry in entries {
        let path = entry.unwrap_or_else(|err| panic!("{err}")).path();
        if path.extension().is_none_or(|ext| ext != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        let expect = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("# expect: "))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("{}: first line is not `# expect: …`", path.display()));
        found.push((path, expect, text));
    }
    found.sort();
    found
}

#[test]
fn every_invalid_fixture_fails_with_its_expected_message() {
    let fixtures = fixtures();
    assert!(fixtures.len() >= 40, "only {} fixtures", fixtures.len());
    for (path, expect, text) in fixtures {
        let message = match parse(&text) {
            Err(err) => err.to_string(),
            Ok(pool) => match validate(&pool) {
                Err(invalid) => {
                    assert_eq!(
                        invalid.errors.len(),
                        1,
                        "{}: a fixture breaks exactly one rule:\n{invalid}",
                        path.display()
                    );
                    invalid.to_string()
                }
                Ok(_) => panic!("{}: accepted", path.display()),
            },
        };
        assert!(
            message.contains(&expect),
            "{}: expected {expect:?} in:\n{message}",
            path.display()
        );
    }
}

#[test]
fn every_fixture_says_what_is_invalid_on_its_second_line() {
    for (path, _, text) in fixtures() {
        assert!(
            text.lines()
                .nth(1)
                .is_some_and(|line| line.starts_with("# Invalid: ")),
            "{}",
            path.display()
        );
    }
}

proptest! {
    #[test]
    fn every_valid_pool_name_gives_machine_names_that_parse(
        name in "[a-z]([a-z0-9-]{0,38}[a-z0-9])?",
        random in any::<u64>(),
    ) {
        let mut pool = workers();
        pool.metadata.name = name.clone();
        let valid = validate(&pool);
        prop_assert!(valid.is_ok(), "{:?}", valid);
        let machine = MachineName::generate(&name, random);
        prop_assert!(MachineName::parse("machine", machine.as_str()).is_ok());
        // Kubernetes label values and Node names: 63; Azure VM and Linux computer names: 64.
        prop_assert!(machine.as_str().len() <= 63);
    }

    #[test]
    fn every_problem_names_a_field_of_the_file_and_a_fix(
        vm_size in ".{0,20}",
        zone in ".{0,3}",
        label_key in ".{0,10}",
        tag_name in ".{0,10}",
        duration in ".{0,6}",
    ) {
        let mut pool = workers();
        pool.spec.template.vm_size = vm_size;
        pool.spec.template.zones = vec![zone];
        pool.spec.template.labels.insert(label_key, "x".into());
        pool.spec.template.tags.insert(tag_name, "x".into());
        pool.spec.drain.timeout = duration;
        if let Err(invalid) = validate(&pool) {
            for error in &invalid.errors {
                prop_assert!(
                    ["apiVersion", "kind", "metadata.", "spec."]
                        .iter()
                        .any(|start| error.field.starts_with(start)),
                    "{}", error
                );
                prop_assert!(!error.problem.is_empty() && !error.fix.is_empty());
            }
            prop_assert_eq!(invalid.to_string().lines().count(), invalid.errors.len());
        }
    }

    #[test]
    fn any_durations_and_counts_are_refused_or_accepted_within_every_limit(
        durations in proptest::array::uniform8(prop_oneof![
            16 => (10u64..=600).prop_map(|n| format!("{n}s")),
            1 => any::<u64>().prop_map(|n| format!("{n}s")),
            1 => any::<u64>().prop_map(|n| format!("{n}h")),
            1 => (0u64..200_000).prop_map(|n| format!("{n}s")),
            1 => ".{0,12}",
        ]),
        surge in prop_oneof![1i64..=1001, any::<i64>()],
        unavailable in prop_oneof![0i64..=1001, any::<i64>()],
        max_failures in prop_oneof![1u32..=1001, any::<u32>()],
        replicas in prop_oneof![0u32..=1001, any::<u32>()],
    ) {
        let mut pool = workers();
        pool.spec.replicas = replicas;
        pool.spec.strategy.max_surge = IntOrPercent::Count(surge);
        pool.spec.strategy.max_unavailable = IntOrPercent::Count(unavailable);
        pool.spec.strategy.max_failures = max_failures;
        let [progress, timeout, pdb, detach, attach, unhealthy, creation, health] = durations;
        pool.spec.strategy.progress_deadline = progress;
        pool.spec.drain.timeout = timeout;
        pool.spec.drain.pdb_retry_interval = pdb;
        pool.spec.drain.volume_detach_timeout = detach;
        pool.spec.drain.volume_attach_timeout = attach;
        pool.spec.drain.force_after_unhealthy = unhealthy;
        pool.spec.timeouts.creation = creation;
        pool.spec.timeouts.health = health;
        if let Ok(valid) = validate(&pool) {
            use crate::limits::*;
            prop_assert!(valid.replicas <= MAX_REPLICAS);
            for amount in [valid.strategy.max_surge, valid.strategy.max_unavailable] {
                prop_assert!(amount.check().is_ok());
            }
            prop_assert!((1..=MAX_FAILURES).contains(&valid.strategy.max_failures));
            prop_assert!(valid.strategy.progress_deadline <= MAX_PROGRESS_DEADLINE);
            prop_assert!(valid.drain.timeout <= MAX_DRAIN_TIMEOUT);
            prop_assert!(valid.drain.pdb_retry_interval <= MAX_PDB_RETRY_INTERVAL);
            prop_assert!(valid.drain.volume_detach_timeout <= MAX_VOLUME_TIMEOUT);
            prop_assert!(valid.drain.volume_attach_timeout <= MAX_VOLUME_TIMEOUT);
            prop_assert!(valid.drain.force_after_unhealthy <= MAX_FORCE_AFTER_UNHEALTHY);
            prop_assert!(valid.timeouts.creation <= MAX_CREATION_TIMEOUT);
            prop_assert!(valid.timeouts.health <= MAX_HEALTH_TIMEOUT);
            // What a machine of this pool carries reads back as the same policy.
            let annotation = crate::drain::policy_to_annotation(&valid.drain);
            prop_assert_eq!(crate::drain::policy_from_annotation(&annotation), Ok(valid.drain));
        }
    }
}

#[test]
fn a_min_ready_beyond_its_bounds_is_refused_with_the_field_and_the_fix() {
    let refused = |min_ready_seconds: u32, progress_deadline: &str| {
        let mut pool = workers();
        pool.spec.strategy.min_ready_seconds = min_ready_seconds;
        pool.spec.strategy.progress_deadline = progress_deadline.into();
        match validate(&pool) {
            Ok(_) => panic!("{min_ready_seconds}s under {progress_deadline} accepted"),
            Err(invalid) => invalid
                .errors
                .into_iter()
                .map(|e| (e.field, e.value, e.problem, e.fix))
                .collect::<Vec<_>>(),
        }
    };
    assert_eq!(
        refused(3601, "2h"),
        [(
            "spec.strategy.minReadySeconds".to_owned(),
            "3601".to_owned(),
            "is more than 3600 (1h): a machine would wait over an hour before it counts available"
                .to_owned(),
            "give a number of seconds from 0 to 3600 (0: available as soon as its Node is Ready)"
                .to_owned(),
        )]
    );
    assert_eq!(
        refused(300, "5m"),
        [(
            "spec.strategy.minReadySeconds".to_owned(),
            "300".to_owned(),
            "is not shorter than progressDeadline 5m: every rollout would stall before its first machine counts available".to_owned(),
            "make minReadySeconds shorter than progressDeadline, or progressDeadline longer".to_owned(),
        )]
    );
    let pool = valid(&{
        let mut pool = workers();
        pool.spec.strategy.min_ready_seconds = 40;
        pool
    });
    assert_eq!(pool.strategy.min_ready, Duration::from_secs(40));
    assert_eq!(
        valid(&workers()).strategy.min_ready,
        Duration::ZERO,
        "default 0"
    );
}

#[test]
fn offerings_and_scheduled_events_reach_the_valid_pool_and_their_bounds_are_named() {
    let defaults = valid(&workers());
    assert_eq!(defaults.offering_ttl, None);
    assert_eq!(
        defaults.scheduled_events,
        crate::scheduled_events::ScheduledEventsPolicy::default()
    );
    let mut pool = workers();
    pool.spec.offerings = Some(crate::pool::spec::OfferingsSpec {
        unavailable_for: Some("20m".to_owned()),
    });
    pool.spec.scheduled_events = Some(
        serde_saphyr::from_str("freeze: { action: drain, ignoreBelow: 10s }\ndrainMargin: 1m\n")
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let checked = valid(&pool);
    assert_eq!(checked.offering_ttl(), Duration::from_secs(1200));
    assert_eq!(
        checked.scheduled_events.freeze.ignore_below,
        Some(Duration::from_secs(10))
    );
    assert_eq!(
        checked.scheduled_events.drain_margin,
        Duration::from_secs(60)
    );
    // Received again as a workflow input, the bounds hold.
    assert!(received::pool("pool", &checked).is_empty());
    let mut stretched = checked.clone();
    stretched.scheduled_events.drain_margin = Duration::from_secs(3600);
    stretched.offering_ttl = Some(Duration::from_secs(1));
    let fields: Vec<String> = received::pool("pool", &stretched)
        .into_iter()
        .map(|e| e.field)
        .collect();
    assert_eq!(
        fields,
        ["pool.scheduledEvents.drainMargin", "pool.offeringTtl"]
    );

    pool.spec.offerings = Some(crate::pool::spec::OfferingsSpec {
        unavailable_for: Some("5s".to_owned()),
    });
    let refused = validate(&pool)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        refused.contains("spec.offerings.unavailableFor: is shorter than 10s"),
        "{refused}"
    );
}
