//! What the crates may depend on: one TLS crypto provider for the whole process, and nothing in
//! the workflows crate that could reach a clock, a random source or the network.

use std::fs;
use std::process::Command;

use toml::Value;

use crate::repo_root;

/// The packages of the workspace's build graph (all targets, normal and build dependencies) that
/// depend on `package`, as `cargo tree -i` prints them; empty when none is compiled in. Cargo.lock
/// itself is no answer: it also lists optional dependencies that no enabled feature builds.
fn dependents_of(package: &str) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(&cargo)
        .current_dir(repo_root())
        .args([
            "tree",
            "--offline",
            "--locked",
            "--workspace",
            "--target",
            "all",
        ])
        .args(["--edges", "normal,build", "--invert", package])
        .output()
        .unwrap_or_else(|e| panic!("running {cargo} tree: {e}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{cargo} tree -i {package} failed: {stderr}"
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn one_tls_crypto_provider_is_compiled_in() {
    assert!(
        !dependents_of("aws-lc-rs").trim().is_empty(),
        "aws-lc-rs, the crypto provider, is no longer compiled in"
    );
    let ring = dependents_of("ring");
    assert!(
        ring.trim().is_empty(),
        "ring is compiled in beside aws-lc-rs: turn off the ring feature of the dependency \
         below (or set its aws-lc-rs feature instead; `cargo tree -i ring -e features` shows \
         which feature):\n{ring}"
    );
}

/// Crates that read clocks, randomness, the network or processes: workflow code must not be able
/// to name them (workflows/clippy.toml refuses the same through std).
const OUTSIDE_WORLD_CRATES: [&str; 8] = [
    "tokio",
    "reqwest",
    "kube",
    "rand",
    "hyper",
    "azure_core",
    "azure_identity",
    "k8s-openapi",
];

#[test]
fn the_workflows_crate_cannot_name_the_outside_world() {
    let path = repo_root().join("workflows/Cargo.toml");
    let text =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let manifest: Value =
        toml::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
    let dependencies = manifest
        .get("dependencies")
        .and_then(Value::as_table)
        .unwrap_or_else(|| panic!("{} has no [dependencies]", path.display()));
    let named: Vec<&str> = OUTSIDE_WORLD_CRATES
        .into_iter()
        .filter(|name| dependencies.contains_key(*name))
        .collect();
    assert!(
        named.is_empty(),
        "workflows/Cargo.toml depends on {}: workflow code must stay deterministic; do the work in \
         an activity (activities/) and call it from the workflow",
        named.join(", ")
    );
    let clippy = repo_root().join("workflows/clippy.toml");
    let rules =
        fs::read_to_string(&clippy).unwrap_or_else(|e| panic!("reading {}: {e}", clippy.display()));
    for banned in [
        "chrono::Utc::now",
        "std::time::SystemTime",
        "std::time::Instant",
        "std::collections::HashMap",
        "std::collections::HashSet",
        "std::thread::spawn",
    ] {
        assert!(
            rules.contains(&format!("\"{banned}\"")),
            "{} no longer refuses {banned}",
            clippy.display()
        );
    }
}
