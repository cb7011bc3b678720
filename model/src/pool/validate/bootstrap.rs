//! The bootstrap's rules: inline text, a Secret reference or a Key Vault secret, at most one; a
//! reference that names a Secret Kubernetes could hold, a secret URI Key Vault could serve; a
//! minted join token (`bootstrapToken`) with a TTL within its limits and the pool's creation
//! timeout, groups the apiserver accepts, and a bootstrap that says where the token goes.

use std::time::Duration;

use super::kube::is_dns_subdomain;
use super::{Problems, quoted};
use crate::bootstrap_token::{PLACEHOLDER, is_extra_group};
use crate::keyvault::SecretUri;
use crate::limits::{MAX_BOOTSTRAP_TOKEN_TTL, MIN_BOOTSTRAP_TOKEN_TTL, short};
use crate::pool::spec::{BootstrapSecretRef, MachineTemplate};

/// The longest key of a Secret's data (Kubernetes' limit on a ConfigMap or Secret key).
const MAX_SECRET_KEY_LEN: usize = 253;

/// Checks `bootstrap`, `bootstrapSecretRef` and `bootstrapKeyVaultSecret` of the template at
/// `field` (`spec.template`).
pub(super) fn check(problems: &mut Problems, field: &str, template: &MachineTemplate) {
    key_vault_secret(problems, field, template);
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

/// `bootstrapKeyVaultSecret`: alone, with a secret URI Key Vault could serve.
fn key_vault_secret(problems: &mut Problems, field: &str, template: &MachineTemplate) {
    let Some(secret) = &template.bootstrap_key_vault_secret else {
        return;
    };
    let at = format!("{field}.bootstrapKeyVaultSecret");
    let others: Vec<String> = [
        template.bootstrap.as_ref().map(|_| "bootstrap"),
        template
            .bootstrap_secret_ref
            .as_ref()
            .map(|_| "bootstrapSecretRef"),
    ]
    .into_iter()
    .flatten()
    .map(|other| format!("{field}.{other}"))
    .collect();
    if !others.is_empty() {
        problems.push(
            at.clone(),
            quoted(&secret.secret_uri),
            format!("is set together with {}", others.join(" and ")),
            format!(
                "keep one way to give the bootstrap: remove {} or {at}",
                others.join(" and ")
            ),
        );
    }
    let uri_field = format!("{at}.secretUri");
    if let Err(found) = SecretUri::parse(&secret.secret_uri) {
        for problem in found {
            problems.push(
                uri_field.clone(),
                quoted(&secret.secret_uri),
                problem.problem,
                problem.fix,
            );
        }
    }
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
            // The text itself may hold a credential: it is never shown.
            "the inline text, not shown",
            format!("does not contain the placeholder {PLACEHOLDER}, so the minted token would reach no machine"),
            format!("write {PLACEHOLDER} where the join takes its token (e.g. kubeadm join … --token {PLACEHOLDER}), or remove {at}"),
        ),
        (None, None) if template.bootstrap_key_vault_secret.is_none() => problems.push(
            at,
            "{…}",
            "is set, but the template has no bootstrap to put the token into",
            format!(
                "set {field}.bootstrapSecretRef, bootstrapKeyVaultSecret or bootstrap to a text with {PLACEHOLDER} where the join takes its token"
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
    use crate::pool::BootstrapKeyVaultSecret;

    /// The fields and problems of a template with these bootstrap settings.
    fn key_vault_problems(
        bootstrap: Option<&str>,
        secret_ref: bool,
        uri: &str,
    ) -> Vec<(String, String)> {
        let mut template: MachineTemplate = serde_json::from_value(serde_json::json!({
            "vmSize": "Standard_D2s_v5",
            "image": { "publisher": "Canonical", "offer": "o", "sku": "s", "version": "latest" },
            "subnetId": "/subscriptions/s/resourceGroups/r/providers/Microsoft.Network/virtualNetworks/v/subnets/n",
        }))
        .expect("a template");
        template.bootstrap = bootstrap.map(str::to_owned);
        template.bootstrap_secret_ref =
            secret_ref.then(|| reference("nodewright", "workers-bootstrap", "bootstrap"));
        template.bootstrap_key_vault_secret = Some(BootstrapKeyVaultSecret {
            secret_uri: uri.to_owned(),
        });
        let mut problems = Problems::default();
        check(&mut problems, "spec.template", &template);
        problems
            .0
            .into_iter()
            .map(|e| (e.field, e.problem))
            .collect()
    }

    #[test]
    fn a_key_vault_secret_is_the_only_bootstrap_and_its_uri_is_checked() {
        const URI: &str = "https://contoso-boot.vault.azure.net/secrets/workers-bootstrap";
        const AT: &str = "spec.template.bootstrapKeyVaultSecret";
        const URI_FIELD: &str = "spec.template.bootstrapKeyVaultSecret.secretUri";
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            bool,
            &'a str,
            Vec<(&'a str, &'a str)>,
        );
        let cases: Vec<Case> = vec![
            ("a secret URI alone is fine", None, false, URI, vec![]),
            (
                "a pinned version is fine",
                None,
                false,
                "https://contoso-boot.vault.azure.net/secrets/workers-bootstrap/4387e9f3d6e14c459867679a90fd0f79",
                vec![],
            ),
            (
                "refuses it with an inline bootstrap",
                Some("#!/bin/bash\n"),
                false,
                URI,
                vec![(AT, "is set together with spec.template.bootstrap")],
            ),
            (
                "refuses it with a Secret reference",
                None,
                true,
                URI,
                vec![(AT, "is set together with spec.template.bootstrapSecretRef")],
            ),
            (
                "refuses all three, naming both others",
                Some("x"),
                true,
                URI,
                vec![
                    (
                        AT,
                        "is set together with spec.template.bootstrap and spec.template.bootstrapSecretRef",
                    ),
                    (
                        "spec.template.bootstrapSecretRef",
                        "is set together with bootstrap",
                    ),
                ],
            ),
            (
                "refuses http",
                None,
                false,
                "http://contoso-boot.vault.azure.net/secrets/workers-bootstrap",
                vec![(URI_FIELD, "is not an https:// URL")],
            ),
            (
                "refuses another host",
                None,
                false,
                "https://contoso.blob.core.windows.net/secrets/workers-bootstrap",
                vec![(URI_FIELD, "is not on a Key Vault host")],
            ),
            (
                "names every problem of a URI",
                None,
                false,
                "https://contoso-boot.vault.azure.net/secrets/workers_bootstrap/v1?x=1",
                vec![
                    (URI_FIELD, "has a query or a fragment"),
                    (URI_FIELD, "does not name a secret Azure allows"),
                    (URI_FIELD, "does not end in a secret version"),
                ],
            ),
        ];
        for (case, bootstrap, secret_ref, uri, expected) in cases {
            let expected: Vec<(String, String)> = expected
                .into_iter()
                .map(|(f, p)| (f.to_owned(), p.to_owned()))
                .collect();
            assert_eq!(
                key_vault_problems(bootstrap, secret_ref, uri),
                expected,
                "{case}"
            );
        }
    }

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
