//! Reading a pool file for the CLI: read, parse, validate, or say exactly what to fix.

use std::path::Path;

use nodewright_model::pool::{self, ValidPool};

use crate::CliError;

/// Reads and validates the pool file at `path`; every problem is an [`CliError::InvalidInput`]
/// naming the file, and the field and fix when the file is readable.
pub fn load(path: &Path) -> Result<ValidPool, CliError> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        CliError::InvalidInput(format!(
            "cannot read pool file {}: {error}; pass --pool with the path of a Pool YAML file (see examples/pools/workers.yaml)",
            path.display()
        ))
    })?;
    let parsed = pool::parse(&text).map_err(|error| {
        CliError::InvalidInput(format!(
            "pool file {}: {error}; nothing was started\n{}",
            path.display(),
            error.rendered
        ))
    })?;
    let valid = pool::validate(&parsed).map_err(|invalid| {
        CliError::InvalidInput(format!(
            "pool file {} is not valid; nothing was started:\n{invalid}",
            path.display()
        ))
    })?;
    if let Some(warning) = credential_warning(&valid) {
        eprintln!("warning: {warning}");
    }
    if let Some(warning) = nodewright_model::machine::registration::warning(
        &valid.template.taints,
        valid.template.bootstrap.as_deref(),
    ) {
        eprintln!("warning: {warning}");
    }
    Ok(valid)
}

/// One line when the inline bootstrap looks like it holds a credential: what it seems to hold
/// (never the text), where it ends up, and the fix.
pub fn credential_warning(pool: &ValidPool) -> Option<String> {
    let hints = pool::credential_hints(pool.template.bootstrap.as_deref()?);
    (!hints.is_empty()).then(|| {
        format!(
            "spec.template.bootstrap looks like it holds {}: an inline bootstrap is stored in plain text in the history of every run of this pool; put it in a Kubernetes Secret and name it in spec.template.bootstrapSecretRef instead (README: Bootstrap secrets)",
            hints.join(" and ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(bootstrap: &str) -> ValidPool {
        let text = format!(
            "apiVersion: nodewright.io/v1alpha1\nkind: Pool\nmetadata:\n  name: workers\nspec:\n  replicas: 1\n  template:\n    vmSize: Standard_D2s_v5\n    image: {{ publisher: Canonical, offer: ubuntu-24_04-lts, sku: server, version: latest }}\n    subnetId: /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/r/providers/Microsoft.Network/virtualNetworks/v/subnets/n\n    sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@example.com\n    bootstrap: {bootstrap:?}\n"
        );
        let parsed = pool::parse(&text).unwrap_or_else(|e| panic!("{e}"));
        pool::validate(&parsed).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_inline_credential_is_warned_about_without_being_printed() {
        let token = "abcdef.0123456789abcdef";
        let warning =
            credential_warning(&pool(&format!("kubeadm join --token {token}"))).expect("a warning");
        assert!(
            warning.contains("a Kubernetes bootstrap token"),
            "{warning}"
        );
        assert!(warning.contains("bootstrapSecretRef"), "{warning}");
        assert!(!warning.contains(token), "{warning}");
        assert_eq!(credential_warning(&pool("#!/bin/bash\nexec kubelet")), None);
    }
}
