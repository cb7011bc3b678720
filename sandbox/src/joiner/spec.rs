//! The Node a kubelet would register for an emulated VM: pure functions, table-tested.
//!
//! Nothing here talks to the API server; [`super`] creates the object and writes its status.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus, NodeSystemInfo, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;

use crate::compute::MachineView;

/// The annotation kwok selects the Nodes it heartbeats by (see `dev/stack`).
pub const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";
/// The value of [`KWOK_ANNOTATION`] kwok is started to manage.
pub const KWOK_ANNOTATION_VALUE: &str = "fake";
/// The annotation that hands the Node's volumes to the attach-detach controller (kubelet sets it).
pub const ATTACH_DETACH_ANNOTATION: &str = "volumes.kubernetes.io/controller-managed-attach-detach";
/// The annotation the joiner sets while it holds a Node's lease because its VM is not running.
pub const HEARTBEAT_STOPPED_ANNOTATION: &str = "joiner.sandbox.nodewright.io/heartbeat-stopped";
/// The lease holder identity the joiner uses to keep kwok from renewing a Node's lease.
pub const STOPPED_LEASE_HOLDER: &str = "nodewright-sandbox-joiner (VM not running)";
/// The annotation kubelet sets for the node TTL controller.
pub const TTL_ANNOTATION: &str = "node.alpha.kubernetes.io/ttl";
/// Tags whose name starts with this carry a Node label: see the module doc of [`super`].
pub const TAG_LABEL_PREFIX: &str = "k8s-node-label.";
/// The prefix of every Node `spec.providerID` on Azure; the VM's ARM id follows.
pub const PROVIDER_ID_SCHEME: &str = "azure://";

/// What a kubelet reports about itself that is not derived from the VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletInfo {
    /// `status.nodeInfo.kubeletVersion`, e.g. `v1.36.3`.
    pub kubelet_version: String,
}

/// CPU cores and memory in GiB of a VM size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// Number of vCPUs.
    pub cpu: u32,
    /// Memory in GiB.
    pub memory_gib: u32,
}

/// The labels and taints a bootstrap script passes to kubelet in custom data.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubeletFlags {
    /// From every `--node-labels=k=v,...`; later flags win.
    pub labels: BTreeMap<String, String>,
    /// From every `--register-with-taints=k=v:Effect,...`, in order.
    pub taints: Vec<Taint>,
}

/// The Node name a kubelet on this VM registers: the computer name, lower-cased as kubelet does.
pub fn node_name(machine: &MachineView) -> String {
    machine.computer_name.to_lowercase()
}

/// `spec.providerID` for the VM: `azure://` + its ARM id, casing kept.
pub fn provider_id(machine: &MachineView) -> String {
    format!("{PROVIDER_ID_SCHEME}{}", machine.id)
}

/// The Node to create for a booted VM, kwok annotation included (kwok v0.8 only takes up Nodes
/// that match its selector when they are added, not when an update makes them match), with its
/// full status (which `create` ignores; write it through the status subresource).
pub fn node_for_machine(machine: &MachineView, kubelet: &KubeletInfo) -> Node {
    let name = node_name(machine);
    let flags = machine
        .custom_data
        .as_deref()
        .map(parse_kubelet_flags)
        .unwrap_or_default();
    let mut labels = tag_labels(&machine.tags);
    labels.extend(flags.labels);
    labels.extend(well_known_labels(machine));
    let annotations = BTreeMap::from([
        (KWOK_ANNOTATION.to_owned(), KWOK_ANNOTATION_VALUE.to_owned()),
        (ATTACH_DETACH_ANNOTATION.to_owned(), "true".to_owned()),
        (TTL_ANNOTATION.to_owned(), "0".to_owned()),
    ]);
    Node {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id(machine)),
            taints: (!flags.taints.is_empty()).then_some(flags.taints),
            ..NodeSpec::default()
        }),
        status: Some(node_status(machine, kubelet)),
    }
}

/// `status` as kubelet reports it: capacity, allocatable, addresses and node info. Conditions are
/// left to kwok's node-initialize stage.
pub fn node_status(machine: &MachineView, kubelet: &KubeletInfo) -> NodeStatus {
    let name = node_name(machine);
    let capacity = capacity_of(&machine.vm_size);
    let resources = BTreeMap::from([
        ("cpu".to_owned(), Quantity(capacity.cpu.to_string())),
        (
            "memory".to_owned(),
            Quantity(format!("{}Gi", capacity.memory_gib)),
        ),
        ("pods".to_owned(), Quantity("110".to_owned())),
        ("ephemeral-storage".to_owned(), Quantity("128Gi".to_owned())),
    ]);
    let id_hash = fnv1a(&machine.id.to_lowercase());
    NodeStatus {
        capacity: Some(resources.clone()),
        allocatable: Some(resources),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".to_owned(),
                address: internal_ip(&name),
            },
            NodeAddress {
                type_: "Hostname".to_owned(),
                address: name,
            },
        ]),
        node_info: Some(NodeSystemInfo {
            architecture: "amd64".to_owned(),
            // UUID-shaped, as Linux's boot_id is. Never bare hex: kwok's node-initialize stage
            // writes it into YAML unquoted, where `4e12...` or all digits read as a number and
            // the stage fails for ever (the Node then never becomes Ready).
            boot_id: uuid_like(id_hash.rotate_left(17)),
            container_runtime_version: "containerd://1.7.27".to_owned(),
            kernel_version: "6.8.0-1021-azure".to_owned(),
            kube_proxy_version: String::new(),
            kubelet_version: kubelet.kubelet_version.clone(),
            machine_id: machine_id(id_hash),
            operating_system: "linux".to_owned(),
            os_image: "Ubuntu 24.04.2 LTS".to_owned(),
            system_uuid: uuid_like(id_hash),
            ..NodeSystemInfo::default()
        }),
        ..NodeStatus::default()
    }
}

/// The labels kubelet and the Azure cloud node manager set: hostname, OS, architecture, instance
/// type, region and zone (`<region>-<zone>`, or `"0"` for a VM outside availability zones).
pub fn well_known_labels(machine: &MachineView) -> BTreeMap<String, String> {
    let zone = match &machine.zone {
        Some(zone) => format!("{}-{zone}", machine.location),
        None => "0".to_owned(),
    };
    [
        ("kubernetes.io/hostname", node_name(machine)),
        ("kubernetes.io/os", "linux".to_owned()),
        ("kubernetes.io/arch", "amd64".to_owned()),
        ("beta.kubernetes.io/os", "linux".to_owned()),
        ("beta.kubernetes.io/arch", "amd64".to_owned()),
        ("node.kubernetes.io/instance-type", machine.vm_size.clone()),
        ("beta.kubernetes.io/instance-type", machine.vm_size.clone()),
        ("topology.kubernetes.io/region", machine.location.clone()),
        (
            "failure-domain.beta.kubernetes.io/region",
            machine.location.clone(),
        ),
        ("topology.kubernetes.io/zone", zone.clone()),
        ("failure-domain.beta.kubernetes.io/zone", zone),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value))
    .collect()
}

/// Labels from tags named [`TAG_LABEL_PREFIX`]`<key>`, where `:` in `<key>` stands for `/`
/// (Azure tag names may not contain `/`; label keys never contain `:`).
pub fn tag_labels(tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|(name, value)| {
            let key = name.strip_prefix(TAG_LABEL_PREFIX)?;
            (!key.is_empty()).then(|| (key.replace(':', "/"), value.clone()))
        })
        .collect()
}

/// Reads `--node-labels` and `--register-with-taints` wherever they appear in a bootstrap script
/// (`--flag=value` or `--flag value`, the value optionally quoted). Malformed entries are skipped,
/// as kubelet would refuse them.
pub fn parse_kubelet_flags(custom_data: &str) -> KubeletFlags {
    let mut flags = KubeletFlags::default();
    for value in flag_values(custom_data, "--node-labels") {
        for entry in value.split(',').filter(|entry| !entry.is_empty()) {
            if let Some((key, value)) = entry.split_once('=')
                && !key.is_empty()
            {
                flags.labels.insert(key.to_owned(), value.to_owned());
            }
        }
    }
    for value in flag_values(custom_data, "--register-with-taints") {
        flags
            .taints
            .extend(value.split(',').filter_map(parse_taint));
    }
    flags
}

/// The bootstrap token a bootstrap script passes to `kubeadm join` (`--token <id>.<secret>` or
/// `--token=<id>.<secret>`, quoted or not), when one of the form `[a-z0-9]{6}\.[a-z0-9]{16}` is
/// there: the first such.
pub fn bootstrap_token(custom_data: &str) -> Option<&str> {
    flag_values(custom_data, "--token")
        .into_iter()
        .find(|value| is_bootstrap_token(value))
}

/// `[a-z0-9]{6}\.[a-z0-9]{16}`.
fn is_bootstrap_token(value: &str) -> bool {
    let token_char = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    value.split_once('.').is_some_and(|(id, secret)| {
        id.len() == 6
            && secret.len() == 16
            && id.bytes().all(token_char)
            && secret.bytes().all(token_char)
    })
}

/// The capacity of a VM size from a small table; unknown sizes get 4 vCPUs and 16 GiB.
pub fn capacity_of(vm_size: &str) -> Capacity {
    const SIZES: &[(&str, u32, u32)] = &[
        ("Standard_B2s", 2, 4),
        ("Standard_B2ms", 2, 8),
        ("Standard_B4ms", 4, 16),
        ("Standard_D2s_v3", 2, 8),
        ("Standard_D4s_v3", 4, 16),
        ("Standard_D8s_v3", 8, 32),
        ("Standard_D2s_v5", 2, 8),
        ("Standard_D4s_v5", 4, 16),
        ("Standard_D8s_v5", 8, 32),
        ("Standard_D16s_v5", 16, 64),
        ("Standard_E4s_v5", 4, 32),
        ("Standard_F4s_v2", 4, 8),
    ];
    SIZES
        .iter()
        .find(|(name, _, _)| name.eq_ignore_ascii_case(vm_size))
        .map_or(
            Capacity {
                cpu: 4,
                memory_gib: 16,
            },
            |&(_, cpu, memory_gib)| Capacity { cpu, memory_gib },
        )
}

/// A stable private address for the Node, derived from its name: `10.a.b.c` with `c` in 4..=254.
pub fn internal_ip(node_name: &str) -> String {
    let hash = fnv1a(node_name);
    let [a, b] = [(hash >> 16) as u8, (hash >> 8) as u8];
    let c = 4 + (hash % 251) as u8;
    format!("10.{a}.{b}.{c}")
}

/// Every value given to `flag` in the text, in order of appearance.
fn flag_values<'a>(text: &'a str, flag: &str) -> Vec<&'a str> {
    let mut values = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(flag) {
        let after = &rest[start + flag.len()..];
        rest = after;
        let value = if let Some(value) = after.strip_prefix('=') {
            value
        } else if after.starts_with([' ', '\t']) {
            after.trim_start_matches([' ', '\t'])
        } else {
            continue; // Another flag sharing the prefix, e.g. `--node-labels-file`.
        };
        let value = value.trim_start_matches(['"', '\'']);
        let end = value
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(value.len());
        values.push(&value[..end]);
    }
    values
}

/// `key=value:Effect` or `key:Effect`, as `--register-with-taints` takes them.
fn parse_taint(entry: &str) -> Option<Taint> {
    let (key_value, effect) = entry.rsplit_once(':')?;
    if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        return None;
    }
    let (key, value) = match key_value.split_once('=') {
        Some((key, value)) => (key, Some(value.to_owned())),
        None => (key_value, None),
    };
    (!key.is_empty()).then(|| Taint {
        key: key.to_owned(),
        value,
        effect: effect.to_owned(),
        time_added: None,
    })
}

/// 64-bit FNV-1a: a stable hash (unlike `DefaultHasher`, the same across runs and releases).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// An `/etc/machine-id`-shaped string from a hash: 32 lowercase hex digits, the first a letter
/// other than `e`. kwok's node-initialize stage writes it into YAML unquoted, where all digits,
/// or digits around one `e` (`12e45…`), read as a number: the stage then fails for ever and the
/// Node never becomes Ready (one machine name in a few hundred did).
fn machine_id(hash: u64) -> String {
    const LEADS: [char; 5] = ['a', 'b', 'c', 'd', 'f'];
    let hex = format!("{hash:016x}{:016x}", hash.rotate_left(41) ^ 0x9e37_79b9);
    let lead = LEADS[usize::try_from(hash % 5).unwrap_or(0)];
    format!("{lead}{}", &hex[1..])
}

/// A UUID-shaped string from a hash, for `systemUUID` and `bootID`: its dashes keep YAML from
/// reading it as a number.
fn uuid_like(hash: u64) -> String {
    let hex = format!("{hash:016x}{:016x}", hash.rotate_left(29) ^ 0x5bd1_e995);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::GuestState;

    fn machine() -> MachineView {
        MachineView {
            id: "/subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/web-abcde"
                .to_owned(),
            name: "web-abcde".to_owned(),
            computer_name: "Web-ABCDE".to_owned(),
            location: "westeurope".to_owned(),
            zone: Some("2".to_owned()),
            vm_size: "Standard_D2s_v5".to_owned(),
            tags: BTreeMap::new(),
            custom_data: None,
            guest: GuestState::Running,
            joins_cluster: true,
        }
    }

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.to_owned(),
            value: value.map(str::to_owned),
            effect: effect.to_owned(),
            time_added: None,
        }
    }

    fn check_flags(custom_data: &str, labels: &[(&str, &str)], taints: &[Taint]) {
        let flags = parse_kubelet_flags(custom_data);
        let expected: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(flags.labels, expected, "labels of {custom_data:?}");
        assert_eq!(flags.taints, taints, "taints of {custom_data:?}");
    }

    /// kwok writes the node info into YAML unquoted: no id may read as a number there. With bare
    /// hex, about one machine in 800 got a boot id like `4e0123...` or all digits.
    #[test]
    fn node_info_ids_never_read_as_numbers() {
        let kubelet = KubeletInfo {
            kubelet_version: "v1.36.3".to_owned(),
        };
        let looks_numeric =
            |text: &str| text.parse::<f64>().is_ok() || text.bytes().all(|b| b.is_ascii_digit());
        for index in 0..20_000 {
            let mut vm = machine();
            vm.id = format!("{}-{index}", vm.id);
            let info = node_status(&vm, &kubelet).node_info.unwrap_or_default();
            for id in [&info.boot_id, &info.system_uuid] {
                assert!(
                    id.contains('-') && !looks_numeric(id),
                    "{id} of machine {index}"
                );
            }
        }
    }

    #[test]
    fn a_machine_id_is_32_hex_digits_that_yaml_never_reads_as_a_number() {
        for n in 0..20_000u64 {
            let id = machine_id(fnv1a(&format!("/subscriptions/s/vms/m-{n}")));
            assert_eq!(id.len(), 32, "{id}");
            assert!(
                id.chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
                "{id}"
            );
            let first = id.chars().next().unwrap_or('0');
            assert!(first.is_ascii_alphabetic() && first != 'e', "{id}");
        }
        // The hash whose old machine id was digits around one `e` gives a string now.
        assert!(machine_id(0x0012_3456_7891_2e45).starts_with(|c: char| c.is_ascii_alphabetic()));
    }

    #[test]
    fn a_kubeadm_join_token_is_found_in_its_flag() {
        for (custom_data, expected) in [
            ("", None),
            (
                "kubeadm join 10.0.0.4:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash sha256:00",
                Some("abcdef.0123456789abcdef"),
            ),
            (
                "kubeadm join --token=\"abcdef.0123456789abcdef\"",
                Some("abcdef.0123456789abcdef"),
            ),
            ("kubeadm join --token <<BOOTSTRAP_TOKEN>>", None),
            ("kubeadm join --token ABCDEF.0123456789abcdef", None),
            ("kubeadm join --token abcdef.0123456789abcde", None),
            (
                "--token-ttl 0 --token x --token abcdef.0123456789abcdef",
                Some("abcdef.0123456789abcdef"),
            ),
            ("--discovery-token abcdef.0123456789abcdef", None),
        ] {
            assert_eq!(bootstrap_token(custom_data), expected, "{custom_data:?}");
        }
    }

    #[test]
    fn kubelet_flags_are_read_as_a_bootstrap_script_passes_them() {
        check_flags("", &[], &[]);
        check_flags("#!/bin/sh\necho hello\n", &[], &[]);
        check_flags(
            "kubelet --node-labels=nodewright.io/pool=web,tier=front --v=2",
            &[("nodewright.io/pool", "web"), ("tier", "front")],
            &[],
        );
        check_flags(
            "KUBELET_EXTRA_ARGS=\"--node-labels a=1 --register-with-taints=dedicated=db:NoSchedule,gpu:NoExecute\"",
            &[("a", "1")],
            &[
                taint("dedicated", Some("db"), "NoSchedule"),
                taint("gpu", None, "NoExecute"),
            ],
        );
        check_flags(
            "--node-labels='a=1,b='\n--node-labels=a=2",
            &[("a", "2"), ("b", "")],
            &[],
        );
        check_flags(
            "--node-labels-file=/etc/x --register-with-taints=bad:Sometimes,=v:NoSchedule,ok=:PreferNoSchedule",
            &[],
            &[taint("ok", Some(""), "PreferNoSchedule")],
        );
    }

    #[test]
    fn tags_with_the_label_prefix_become_labels_with_colons_as_slashes() {
        let tags = BTreeMap::from([
            (
                "k8s-node-label.nodewright.io:pool".to_owned(),
                "web".to_owned(),
            ),
            ("k8s-node-label.tier".to_owned(), "front".to_owned()),
            ("k8s-node-label.".to_owned(), "ignored".to_owned()),
            ("nodewright.io-pool".to_owned(), "not-a-label".to_owned()),
        ]);
        let expected = BTreeMap::from([
            ("nodewright.io/pool".to_owned(), "web".to_owned()),
            ("tier".to_owned(), "front".to_owned()),
        ]);
        assert_eq!(tag_labels(&tags), expected);
    }

    #[test]
    fn capacity_comes_from_the_size_table_with_a_fallback() {
        let cases = [
            ("Standard_D2s_v5", 2, 8),
            ("standard_d8s_v5", 8, 32),
            ("Standard_B2s", 2, 4),
            ("Standard_Unknown", 4, 16),
        ];
        for (size, cpu, memory_gib) in cases {
            assert_eq!(capacity_of(size), Capacity { cpu, memory_gib }, "{size}");
        }
    }

    #[test]
    fn internal_ip_is_stable_and_private() {
        let ip = internal_ip("web-abcde");
        assert_eq!(ip, internal_ip("web-abcde"));
        assert_ne!(ip, internal_ip("web-fghij"));
        let octets: Vec<u8> = ip.split('.').map(|o| o.parse().unwrap()).collect();
        assert_eq!(octets.len(), 4);
        assert_eq!(octets[0], 10);
        assert!((4..=254).contains(&octets[3]), "{ip}");
    }

    #[test]
    fn node_carries_provider_id_labels_annotations_and_status() {
        let mut machine = machine();
        machine
            .tags
            .insert("k8s-node-label.team".to_owned(), "a".to_owned());
        machine.custom_data = Some(
            "--node-labels=team=b,kubernetes.io/hostname=spoofed --register-with-taints=x=y:NoSchedule"
                .to_owned(),
        );
        let kubelet = KubeletInfo {
            kubelet_version: "v1.36.3".to_owned(),
        };
        let node = node_for_machine(&machine, &kubelet);
        assert_eq!(node.metadata.name.as_deref(), Some("web-abcde"));
        let spec = node.spec.unwrap();
        assert_eq!(
            spec.provider_id.as_deref(),
            Some(
                "azure:///subscriptions/s/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/web-abcde"
            )
        );
        assert_eq!(
            spec.taints.unwrap(),
            vec![taint("x", Some("y"), "NoSchedule")]
        );
        let labels = node.metadata.labels.unwrap();
        for (key, value) in [
            ("team", "b"),
            ("kubernetes.io/hostname", "web-abcde"),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("node.kubernetes.io/instance-type", "Standard_D2s_v5"),
            ("topology.kubernetes.io/region", "westeurope"),
            ("topology.kubernetes.io/zone", "westeurope-2"),
        ] {
            assert_eq!(labels.get(key).map(String::as_str), Some(value), "{key}");
        }
        let annotations = node.metadata.annotations.unwrap();
        assert_eq!(annotations[ATTACH_DETACH_ANNOTATION], "true");
        assert_eq!(annotations[KWOK_ANNOTATION], KWOK_ANNOTATION_VALUE);
        let status = node.status.unwrap();
        assert_eq!(status.capacity.as_ref().unwrap()["cpu"].0, "2");
        assert_eq!(status.allocatable.as_ref().unwrap()["memory"].0, "8Gi");
        assert_eq!(status.node_info.unwrap().kubelet_version, "v1.36.3");
    }

    #[test]
    fn zone_label_is_zero_outside_availability_zones() {
        let mut machine = machine();
        machine.zone = None;
        assert_eq!(
            well_known_labels(&machine)["topology.kubernetes.io/zone"],
            "0"
        );
    }
}
