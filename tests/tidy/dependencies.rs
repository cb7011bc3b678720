//! What the crates may depend on: one TLS crypto provider for the whole process, and nothing in
//! the workflows crate that could reach a clock, a random source or the network.

use std::process::Command;

use toml::Value;

use crate::{read, repo_root, report};

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
        "{cargo} tree -i {package} failed (a crate not downloaded yet? `cargo fetch --locked` \
         fetches them all; dev/test does): {stderr}"
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

/// The names of the `[dependencies]` of `crate_dir`'s Cargo.toml (not the dev-dependencies).
fn dependency_names(crate_dir: &str) -> Vec<String> {
    let path = repo_root().join(crate_dir).join("Cargo.toml");
    let manifest: Value =
        toml::from_str(&read(&path)).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
    manifest
        .get("dependencies")
        .and_then(Value::as_table)
        .unwrap_or_else(|| panic!("{} has no [dependencies]", path.display()))
        .keys()
        .cloned()
        .collect()
}

/// The dependencies of `crate_dir` whose names start with one of `forbidden`.
fn forbidden_dependencies(crate_dir: &str, forbidden: &[&str]) -> Vec<String> {
    dependency_names(crate_dir)
        .into_iter()
        .filter(|name| forbidden.iter().any(|prefix| name.starts_with(prefix)))
        .collect()
}

#[test]
fn model_has_no_io_async_or_temporal_dependencies() {
    let forbidden = [
        "tokio",
        "reqwest",
        "kube",
        "temporalio",
        "futures",
        "chrono",
        "rand",
    ];
    let violations = forbidden_dependencies("model", &forbidden)
        .into_iter()
        .map(|name| format!("model depends on {name}"))
        .collect();
    report(violations, "model is pure");
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
    let named = forbidden_dependencies("workflows", &OUTSIDE_WORLD_CRATES);
    assert!(
        named.is_empty(),
        "workflows/Cargo.toml depends on {}: workflow code must stay deterministic; do the work in \
         an activity (activities/) and call it from the workflow",
        named.join(", ")
    );
    let rules = read(&repo_root().join("workflows/clippy.toml"));
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
            "workflows/clippy.toml no longer refuses {banned}"
        );
    }
}
