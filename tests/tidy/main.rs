//! House rules that a reviewer should not have to repeat (see shared style guide, rules 2, 10-12).
//! Needs no stack: it reads the source tree.

mod compose;
mod dependencies;
mod deploy;
mod messages;
mod modules;
mod monitoring;
mod node_agent;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const CRATES: [&str; 8] = [
    "model",
    "connect",
    "workflows",
    "activities",
    "worker",
    "starter",
    "sandbox",
    "tests",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The text of `path`; a file that cannot be read fails the test, naming it.
fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
}

/// The paths in folder `dir`, sorted; a folder or entry that cannot be read fails the test,
/// naming it.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("reading folder {}: {error}", dir.display()))
        .map(|entry| {
            entry
                .unwrap_or_else(|error| panic!("reading folder {}: {error}", dir.display()))
                .path()
        })
        .collect();
    paths.sort();
    paths
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for path in entries(dir) {
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

fn sources(crate_dir: &str) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(&repo_root().join(crate_dir), &mut files);
    files
        .into_iter()
        .map(|path| {
            let text = read(&path);
            (path, text)
        })
        .collect()
}

/// The part of a file before its `#[cfg(test)]` module.
fn non_test_part(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or(text)
}

fn report(violations: Vec<String>, rule: &str) {
    assert!(
        violations.is_empty(),
        "{rule}:\n  {}",
        violations.join("\n  ")
    );
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let violations = CRATES
        .iter()
        .flat_map(|c| sources(c))
        .filter(|(_, text)| {
            let first = text.lines().next().unwrap_or_default();
            !(first.starts_with("//!") || first.starts_with("#![doc = include_str!"))
        })
        .map(|(path, _)| path.display().to_string())
        .collect();
    report(violations, "files without a //! header");
}

#[test]
fn no_unwrap_or_expect_outside_tests() {
    // Test code may unwrap: the tests crate is all test code.
    let violations = CRATES
        .iter()
        .filter(|c| **c != "tests")
        .flat_map(|c| {
            // A crate's integration tests (`<crate>/tests/`) and benchmarks are test code too.
            let test_dirs = [c.to_string() + "/tests/", c.to_string() + "/benches/"];
            sources(c).into_iter().filter(move |(path, _)| {
                let relative = path.strip_prefix(repo_root()).unwrap_or(path);
                let relative = relative.to_string_lossy();
                !test_dirs
                    .iter()
                    .any(|dir| relative.starts_with(dir.as_str()))
            })
        })
        .filter(|(_, text)| {
            let code = non_test_part(text);
            code.contains(".unwrap()") || code.contains(".expect(")
        })
        .map(|(path, _)| path.display().to_string())
        .collect();
    report(violations, "unwrap()/expect() outside tests");
}

#[test]
fn no_should_panic_tests() {
    let violations = CRATES
        .iter()
        .flat_map(|c| sources(c))
        .filter(|(path, text)| !path.ends_with("tidy/main.rs") && text.contains("#[should_panic"))
        .map(|(path, _)| path.display().to_string())
        .collect();
    report(violations, "assert on the Err instead of #[should_panic]");
}

#[test]
fn every_runbook_has_the_house_headings() {
    let headings = [
        "## Purpose",
        "## Input",
        "## Expected Flow",
        "## Guarantees",
        "## Signals and Queries",
        "## Failure and Recovery",
        "## Starting It",
    ];
    let dir = repo_root().join("workflows/runbooks");
    let mut violations = Vec::new();
    let mut count = 0;
    for path in entries(&dir) {
        count += 1;
        let text = read(&path);
        for heading in headings.iter().filter(|h| !text.contains(*h)) {
            violations.push(format!("{} lacks {heading}", path.display()));
        }
    }
    assert!(count > 0, "no runbooks found in {}", dir.display());
    report(violations, "runbook headings");
}

/// The justified debug formatting in messages: (file, the placeholder, why). Keep it short; a
/// new entry needs a reason a reviewer accepts.
const DEBUG_FORMAT_ALLOWED: &[(&str, &str, &str)] = &[
    // Empty on purpose: every message for people is written as words. A `Debug` impl written by
    // hand (`write!(f, "{:?}", …)` inside `impl fmt::Debug`) would go here, with its file.
];

#[test]
fn messages_for_people_carry_no_debug_formatting() {
    // The crates whose text reaches people (the `tests` crate is all test code).
    let crates = [
        "model",
        "workflows",
        "activities",
        "worker",
        "starter",
        "sandbox",
    ];
    let files: Vec<(PathBuf, String)> = crates.iter().flat_map(|c| sources(c)).collect();
    let test_modules: BTreeSet<PathBuf> = files
        .iter()
        .flat_map(|(path, text)| messages::test_module_paths(path, text))
        .collect();
    let root = repo_root();
    let mut violations = Vec::new();
    for (path, text) in &files {
        let relative = path.strip_prefix(&root).unwrap_or(path);
        let is_test_code = relative.components().nth(1).is_some_and(|dir| {
            matches!(
                dir.as_os_str().to_str(),
                Some("tests" | "benches" | "examples")
            )
        }) || test_modules.iter().any(|module| path.starts_with(module));
        if is_test_code {
            continue;
        }
        let relative = relative.to_string_lossy();
        for literal in messages::string_literals(&messages::without_test_items(text)) {
            for placeholder in messages::debug_placeholders(&literal.text) {
                let allowed = DEBUG_FORMAT_ALLOWED
                    .iter()
                    .any(|(file, allowed, _)| relative == *file && placeholder == *allowed);
                if !allowed {
                    violations.push(format!(
                        "{relative}:{}: {placeholder} in \"{}\"",
                        literal.line,
                        literal.text.lines().next().unwrap_or_default()
                    ));
                }
            }
        }
    }
    report(
        violations,
        "Rust debug formatting in text meant for people (it prints None, Some(..) or a struct \
         dump). Write words instead: a string as {x} or quoted with nodewright_model::text::quoted, \
         an Option as its value or words such as \"none\", an enum through Display or as_str, a \
         Duration with nodewright_model::text::duration, an error with \
         nodewright_model::text::error_chain. Debug stays fine in tests and in tracing's ?field \
         sigils; a justified case goes in DEBUG_FORMAT_ALLOWED with its reason",
    );
}

/// Cycles printed but let through for now: (target, module prefix, why). A cycle passes when
/// one of its modules lies under the prefix (`""`: the whole target). Keep it short.
const CYCLES_ALLOWED: &[(&str, &str, &str)] = &[];

#[test]
fn no_import_cycles_between_modules() {
    let root = repo_root();
    let mut violations = Vec::new();
    for crate_dir in CRATES {
        for target in modules::targets(&root, crate_dir, sources(crate_dir)) {
            let graph = modules::graph(&target.files);
            for cycle in modules::cycles(&graph) {
                let line = format!("{}: {}", target.label, cycle.join(" -> "));
                let allowed = CYCLES_ALLOWED.iter().find(|(label, prefix, _)| {
                    *label == target.label
                        && cycle.iter().any(|module| {
                            module.as_str() == *prefix
                                || module.starts_with(&format!("{prefix}::"))
                                || prefix.is_empty()
                        })
                });
                match allowed {
                    Some((_, _, why)) => println!("allowed ({why}): {line}"),
                    None => violations.push(line),
                }
            }
        }
    }
    report(
        violations,
        "import cycles between modules (module A uses B and B, directly or through others, uses \
         A; see tests/tidy/modules.rs for the rule): move what both need into a leaf module",
    );
}
