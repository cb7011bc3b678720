//! The house rules for the node agent (`agent/`, not in `CRATES`: it came after them), and what
//! it may depend on: `model` below it and nothing of the worker's (no Temporal, no ARM client;
//! a DaemonSet on every Node stays small). Needs no stack.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::{messages, modules, non_test_part, read, repo_root, report, sources};

const AGENT: &str = "agent";

#[test]
fn every_agent_file_starts_with_a_module_doc_and_has_no_unwrap_outside_tests() {
    let mut violations = Vec::new();
    for (path, text) in sources(AGENT) {
        if !text.lines().next().unwrap_or_default().starts_with("//!") {
            violations.push(format!("{}: no //! header", path.display()));
        }
        let code = non_test_part(&text);
        let is_test_file = path.file_name().is_some_and(|name| name == "tests.rs");
        if !is_test_file && (code.contains(".unwrap()") || code.contains(".expect(")) {
            violations.push(format!(
                "{}: unwrap()/expect() outside tests",
                path.display()
            ));
        }
        if text.contains(concat!("#[should", "_panic")) {
            violations.push(format!("{}: a should-panic test", path.display()));
        }
    }
    report(violations, "the node agent's files");
}

#[test]
fn the_agents_messages_carry_no_debug_formatting() {
    let files: Vec<(PathBuf, String)> = sources(AGENT);
    let test_modules: BTreeSet<PathBuf> = files
        .iter()
        .flat_map(|(path, text)| messages::test_module_paths(path, text))
        .collect();
    let root = repo_root();
    let mut violations = Vec::new();
    for (path, text) in &files {
        if test_modules.iter().any(|module| path.starts_with(module)) {
            continue;
        }
        let relative = path.strip_prefix(&root).unwrap_or(path).to_string_lossy();
        for literal in messages::string_literals(&messages::without_test_items(text)) {
            for placeholder in messages::debug_placeholders(&literal.text) {
                violations.push(format!("{relative}:{}: {placeholder}", literal.line));
            }
        }
    }
    report(
        violations,
        "Rust debug formatting in the node agent's messages",
    );
}

#[test]
fn the_agent_has_no_import_cycles() {
    let mut violations = Vec::new();
    for target in modules::targets(&repo_root(), AGENT, sources(AGENT)) {
        for cycle in modules::cycles(&modules::graph(&target.files)) {
            violations.push(format!("{}: {}", target.label, cycle.join(" -> ")));
        }
    }
    report(violations, "import cycles in the node agent");
}

#[test]
fn the_agent_depends_on_model_and_nothing_of_the_worker() {
    let path = repo_root().join(AGENT).join("Cargo.toml");
    let manifest: toml::Table = toml::from_str(&read(&path)).expect("agent/Cargo.toml is TOML");
    let names: Vec<String> = manifest
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|table| table.keys().cloned().collect())
        .unwrap_or_default();
    assert!(names.iter().any(|n| n == "nodewright-model"), "{names:?}");
    let forbidden: Vec<&String> = names
        .iter()
        .filter(|name| {
            name.starts_with("temporalio")
                || [
                    "nodewright-activities",
                    "nodewright-workflows",
                    "nodewright-connect",
                ]
                .contains(&name.as_str())
                || name.starts_with("azure_")
        })
        .collect();
    assert!(
        forbidden.is_empty(),
        "agent/Cargo.toml depends on {forbidden:?}: the agent runs on every Node and needs only \
         model, kube and an HTTP client"
    );
}
