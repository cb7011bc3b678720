//! The bootstrap's rules: inline text or a Secret reference, never both; a reference that names
//! a Secret Kubernetes could hold.

use super::kube::is_dns_subdomain;
use super::{Problems, quoted};
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
