//! The bootstrap's rules: inline text or a Secret reference, never both; a reference that names
//! a Secret Kubernetes could hold; a minted join token (`bootstrapToken`) with a TTL within its
//! limits and the pool's creation timeout, groups the apiserver accepts, and a bootstrap that
//! says where the token goes.

use std::time::Duration;

use super::kube::is_dns_subdomain;
use super::{Problems, quoted};
use crate::bootstrap_token::{PLACEHOLDER, is_extra_group};
use crate::limits::{MAX_BOOTSTRAP_TOKEN_TTL, MIN_BOOTSTRAP_TOKEN_TTL, short};
use crate::pool::spec::{BootstrapSecretRef, MachineTemplate};

/// The longest key of a Secret's data (Kubernetes' limit on a ConfigMap or Secret key).
const MAX_SECRET_KEY_LEN: usize = 253;

/// Checks `bootstrap` and `bootstrapSecretRef` of the template at `field` (`spec.template`).
pub(super) fn check(problems: &mut Problems, field: &str, template: &MachineTemplate) {
    let Some(reference) = &template.bootstrap_secret_ref else {
        return;
    };
    let at = format!("{field}.bootstrapSecretRef");
    if template.bootstrap.is_some() {
        problems.push(
            at.clone(),
            format!("{reference}"),
            "is set together with bootstrap",
            format!(
                "keep one: the reference ({at}) keeps the text out of every run; remove {field}.bootstrap"
            ),
        );
    }
    secret_reference(problems, &at, reference);
}

/// Checks `bootstrapToken` of the template at `field` (`spec.template`): its TTL within the
/// limits and at least `creation` (the pool's creation timeout, at `creation_field`; zero when
/// that field is invalid and reported already), its extra groups, and a bootstrap that holds
/// [`PLACEHOLDER`] (an inline one here; a Secret's when the worker reads it).
pub(super) fn token(
    problems: &mut Problems,
    field: &str,
    template: &MachineTemplate,
    creation: Duration,
    creation_field: &str,
) {
    let Some(token) = &template.bootstrap_token else {
        return;
    };
    let at = format!("{field}.bootstrapToken");
    let ttl_field = format!("{at}.ttl");
    let bounds = format!(
        "write a duration from {} to {} such as \"30m\" (units: s, m, h)",
        short(MIN_BOOTSTRAP_TOKEN_TTL),
        short(MAX_BOOTSTRAP_TOKEN_TTL)
    );
    match humantime::parse_duration(&token.ttl) {
        Err(error) => problems.push(
            ttl_field,
            quoted(&token.ttl),
            format!("is not a duration ({error})"),
            bounds,
        ),
        Ok(ttl) if ttl < MIN_BOOTSTRAP_TOKEN_TTL => problems.push(
            ttl_field,
            quoted(&token.ttl),
            format!(
                "is shorter than {}: a VM takes minutes to boot and join",
                short(MIN_BOOTSTRAP_TOKEN_TTL)
            ),
            bounds,
        ),
        Ok(ttl) if ttl > MAX_BOOTSTRAP_TOKEN_TTL => problems.push(
            ttl_field,
            quoted(&token.ttl),
            format!("is longer than {}", short(MAX_BOOTSTRAP_TOKEN_TTL)),
            bounds,
        ),
        Ok(ttl) if !creation.is_zero() && ttl < creation => problems.push(
            ttl_field.clone(),
            quoted(&token.ttl),
            format!(
                "is shorter than {creation_field} ({}): the token could expire before the machine joins",
                humantime::format_duration(creation)
            ),
            format!("make {ttl_field} at least {creation_field}, or shorten {creation_field}"),
        ),
        Ok(_) => {}
    }
    for (index, group) in token.extra_groups.iter().enumerate() {
        if !is_extra_group(group) {
            problems.push(
                format!("{at}.extraGroups[{index}]"),
                quoted(group),
                "is not a bootstrap token group",
                "write system:bootstrappers:<name>, the name of lowercase letters, digits, ':' and '-' ending with a letter or digit (e.g. system:bootstrappers:kubeadm:default-node-token)",
            );
        }
    }
    match (&template.bootstrap, &template.bootstrap_secret_ref) {
        (Some(inline), _) if !inline.contains(PLACEHOLDER) => problems.push(
            format!("{field}.bootstrap"),
            quoted(inline),
            format!("does not contain the placeholder {PLACEHOLDER}, so the minted token would reach no machine"),
            format!("write {PLACEHOLDER} where the join takes its token (e.g. kubeadm join … --token {PLACEHOLDER}), or remove {at}"),
        ),
        (None, None) => problems.push(
            at,
            "{…}",
            "is set, but the template has no bootstrap to put the token into",
            format!(
                "set {field}.bootstrapSecretRef (or bootstrap) to a text with {PLACEHOLDER} where the join takes its token"
            ),
        ),
        _ => {}
    }
}

fn secret_reference(problems: &mut Problems, field: &str, reference: &BootstrapSecretRef) {
    if !is_dns_label(&reference.namespace) {
        problems.push(
            format!("{field}.namespace"),
            quoted(&reference.namespace),
            "is not a Kubernetes namespace name",
            "write a lowercase DNS label of at most 63 characters (e.g. nodewright)",
        );
    }
    if !is_dns_subdomain(&reference.name) {
        problems.push(
            format!("{field}.name"),
            quoted(&reference.name),
            "is not a Kubernetes Secret name",
            "write a lowercase DNS subdomain of at most 253 characters (e.g. workers-bootstrap)",
        );
    }
    if !is_secret_key(&reference.key) {
        problems.push(
            format!("{field}.key"),
            quoted(&reference.key),
            "is not a Secret data key",
            "write at most 253 letters, digits, '-', '_' or '.' (e.g. bootstrap)",
        );
    }
}

/// A DNS label (RFC 1123): a namespace name.
fn is_dns_label(value: &str) -> bool {
    !value.contains('.') && value.len() <= 63 && is_dns_subdomain(value)
}

/// A key of a Secret's `data`: `[-._a-zA-Z0-9]+`, at most 253 characters.
fn is_secret_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_SECRET_KEY_LEN
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(namespace: &str, name: &str, key: &str) -> BootstrapSecretRef {
        BootstrapSecretRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            key: key.to_owned(),
        }
    }

    fn fields(reference: &BootstrapSecretRef) -> Vec<String> {
        let mut problems = Problems::default();
        secret_reference(&mut problems, "r", reference);
        problems.0.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn a_reference_names_a_namespace_a_secret_and_a_key_kubernetes_accepts() {
        let cases = [
            (
                reference("nodewright", "workers-bootstrap", "bootstrap"),
                vec![],
            ),
            (
                reference("nodewright", "boot.v2", "cloud-init.yaml"),
                vec![],
            ),
            (reference("Nodewright", "b", "k"), vec!["r.namespace"]),
            (reference("a.b", "b", "k"), vec!["r.namespace"]),
            (reference("", "b", "k"), vec!["r.namespace"]),
            (reference("ns", "Boot", "k"), vec!["r.name"]),
            (reference("ns", "", "k"), vec!["r.name"]),
            (reference("ns", "b", ""), vec!["r.key"]),
            (reference("ns", "b", "a/b"), vec!["r.key"]),
            (reference("ns", "b", &"k".repeat(254)), vec!["r.key"]),
        ];
        for (reference, expected) in cases {
            assert_eq!(fields(&reference), expected, "{reference:?}");
        }
    }
}
