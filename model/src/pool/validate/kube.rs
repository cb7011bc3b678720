//! Rules for what the Node gets: labels and taints, in Kubernetes' syntax, outside the
//! prefixes nodewright and Kubernetes reserve.

use std::collections::BTreeMap;

use super::{Problems, entry, quoted};
use crate::pool::spec::TaintSpec;

/// The longest label name (the part after the prefix) and label value.
const MAX_LABEL_NAME_LEN: usize = 63;
/// The longest label key prefix (a DNS subdomain).
const MAX_LABEL_PREFIX_LEN: usize = 253;

/// The node-role labels of control-plane machines (`kubeadm` sets the first; the second is its
/// name before Kubernetes 1.24, still read by tools and policies).
const CONTROL_PLANE_ROLES: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];

/// Labels under the prefixes a pool may use (`node.kubernetes.io/`) whose value Kubernetes
/// sets from the machine itself (the cloud provider, from the VM size).
const SET_BY_KUBERNETES: [&str; 1] = ["node.kubernetes.io/instance-type"];

/// The effects a taint can have.
const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

pub(super) const KEY_FIX: &str = "use [prefix/]name: a name of 1-63 letters, digits, '-', '_' and '.', \
     starting and ending with a letter or digit, after an optional lowercase DNS prefix \
     (e.g. example.com/role)";
pub(super) const VALUE_FIX: &str = "use at most 63 letters, digits, '-', '_' and '.', starting and ending \
     with a letter or digit, or an empty value";

/// Checks every label of the map at `field`.
pub(super) fn labels(problems: &mut Problems, field: &str, labels: &BTreeMap<String, String>) {
    for (key, value) in labels {
        let item = entry(field, key);
        check_key(problems, &item, "key", key, true);
        if !is_label_value(value) {
            problems.push(
                &item,
                quoted(value),
                "value is not a label value",
                VALUE_FIX,
            );
        }
    }
}

/// Checks every taint of the list at `field`.
pub(super) fn taints(problems: &mut Problems, field: &str, taints: &[TaintSpec]) {
    for (index, taint) in taints.iter().enumerate() {
        let item = format!("{field}[{index}]");
        check_key(problems, &format!("{item}.key"), "", &taint.key, false);
        if !is_label_value(&taint.value) {
            problems.push(
                format!("{item}.value"),
                quoted(&taint.value),
                "is not a taint value",
                VALUE_FIX,
            );
        }
        if !TAINT_EFFECTS.contains(&taint.effect.as_str()) {
            problems.push(
                format!("{item}.effect"),
                quoted(&taint.effect),
                "is not a taint effect",
                format!("use one of {}", TAINT_EFFECTS.join(", ")),
            );
        }
        let earlier = taints[..index]
            .iter()
            .position(|other| other.key == taint.key && other.effect == taint.effect);
        if let Some(earlier) = earlier {
            problems.push(
                item,
                quoted(&format!("{}:{}", taint.key, taint.effect)),
                format!("repeats the key and effect of {field}[{earlier}]"),
                "keep one taint per key and effect",
            );
        }
    }
}

/// Checks a label or taint key's syntax and reserved prefixes. `what` prefixes the problem
/// (`"key"` inside a map entry, empty for a `.key` field); `kubelet_rules` adds the prefixes
/// Kubernetes keeps for itself on labels.
fn check_key(problems: &mut Problems, field: &str, what: &str, key: &str, kubelet_rules: bool) {
    let problem = |text: &str| {
        if what.is_empty() {
            text.to_owned()
        } else {
            format!("{what} {text}")
        }
    };
    if !is_label_key(key) {
        problems.push(field, quoted(key), problem("is not a label key"), KEY_FIX);
        return;
    }
    let Some((prefix, _)) = key.split_once('/') else {
        return;
    };
    if kubelet_rules && CONTROL_PLANE_ROLES.contains(&key) {
        problems.push(
            field,
            quoted(key),
            problem(
                "claims the control-plane role: tools, Pod placement and policies that trust it \
                 would treat a worker as a control-plane machine (the kubelet itself may never set \
                 node-role labels, so only nodewright could)",
            ),
            "give workers a role of their own, e.g. node-role.kubernetes.io/worker or \
             example.com/role; control-plane machines are not nodewright's to create",
        );
        return;
    }
    if kubelet_rules && SET_BY_KUBERNETES.contains(&key) {
        problems.push(
            field,
            quoted(key),
            problem(
                "is set by Kubernetes and Azure from the machine itself: a pool's value would \
                 let a worker claim another size than it has",
            ),
            "leave it out (Kubernetes sets it from the VM size) and label with your own prefix \
             (e.g. example.com/size)",
        );
        return;
    }
    if is_in_domain(prefix, "nodewright.io") {
        problems.push(
            field,
            quoted(key),
            problem("uses the prefix nodewright.io/, which nodewright keeps for its own"),
            "choose another prefix (e.g. example.com/role); nodewright itself sets \
             nodewright.io/pool, nodewright.io/machine, nodewright.io/template and \
             nodewright.io/image-version",
        );
    } else if kubelet_rules
        && (is_in_domain(prefix, "kubernetes.io") || is_in_domain(prefix, "k8s.io"))
        && prefix != "node-role.kubernetes.io"
        && prefix != "node.kubernetes.io"
    {
        problems.push(
            field,
            quoted(key),
            problem("uses a prefix Kubernetes keeps for its own"),
            "use node-role.kubernetes.io/<role>, node.kubernetes.io/<name> or your own prefix \
             (e.g. example.com/role)",
        );
    }
}

/// Whether `prefix` is `domain` or one of its subdomains.
fn is_in_domain(prefix: &str, domain: &str) -> bool {
    prefix == domain
        || prefix
            .strip_suffix(domain)
            .is_some_and(|sub| sub.ends_with('.'))
}

/// Whether `key` is a Kubernetes label key: `[prefix/]name`, the prefix a DNS subdomain of at
/// most 253 characters, the name a [label value](is_label_value) of 1-63 characters.
pub(super) fn is_label_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_label_name(name),
        None => is_label_name(key),
    }
}

/// Whether `value` is a Kubernetes label value: empty, or 1-63 characters of letters, digits,
/// `-`, `_` and `.`, starting and ending with a letter or digit.
pub(super) fn is_label_value(value: &str) -> bool {
    value.is_empty() || is_label_name(value)
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 characters.
fn is_label_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= MAX_LABEL_NAME_LEN
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// A lowercase DNS subdomain (RFC 1123) of at most 253 characters.
pub(super) fn is_dns_subdomain(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_LABEL_PREFIX_LEN
        && value.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    bytes.len() <= 63
                        && (first.is_ascii_lowercase() || first.is_ascii_digit())
                        && (last.is_ascii_lowercase() || last.is_ascii_digit())
                        && bytes
                            .iter()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                }
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn label_key_syntax_follows_kubernetes() {
        let long_name = "a".repeat(63);
        let too_long_name = "a".repeat(64);
        let long_prefix = format!("{}.io/x", vec!["a".repeat(62); 4].join("."));
        let table: &[(&str, bool)] = &[
            ("role", true),
            ("Role_2.x", true),
            ("example.com/role", true),
            ("node-role.kubernetes.io/worker", true),
            ("a/b", true),
            (&long_name, true),
            (&too_long_name, false),
            ("", false),
            ("-role", false),
            ("role-", false),
            ("ro le", false),
            ("Example.com/role", false),
            ("example..com/role", false),
            ("-example.com/role", false),
            ("/role", false),
            ("example.com/", false),
            ("a/b/c", false),
            (&long_prefix, false),
        ];
        for (key, expected) in table {
            assert_eq!(is_label_key(key), *expected, "{key:?}");
        }
    }

    #[test]
    fn reserved_prefixes_cover_the_domain_and_its_subdomains_only() {
        let table = [
            ("nodewright.io", "nodewright.io", true),
            ("x.nodewright.io", "nodewright.io", true),
            ("mynodewright.io", "nodewright.io", false),
            ("kubernetes.io", "kubernetes.io", true),
            ("topology.kubernetes.io", "kubernetes.io", true),
            ("example.com", "kubernetes.io", false),
        ];
        for (prefix, domain, expected) in table {
            assert_eq!(is_in_domain(prefix, domain), expected, "{prefix}");
        }
    }

    proptest! {
        #[test]
        fn every_label_name_is_a_key_and_a_value(name in "[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?") {
            prop_assert!(is_label_key(&name));
            prop_assert!(is_label_value(&name));
            let prefixed = format!("example.com/{name}");
            prop_assert!(is_label_key(&prefixed));
        }

        #[test]
        fn no_label_value_is_longer_than_63_or_has_a_slash(value in "[-A-Za-z0-9_./ ]{0,70}") {
            if is_label_value(&value) {
                prop_assert!(value.len() <= 63);
                prop_assert!(!value.contains('/') && !value.contains(' '));
            }
        }
    }
}
