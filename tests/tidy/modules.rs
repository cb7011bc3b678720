//! No import cycles between modules: in every crate of the workspace (each library, binary,
//! integration-test and benchmark target), module A must not use module B while B, directly or
//! through a circle of other modules, uses A. A cycle means neither side can be read, changed or
//! moved alone.
//!
//! # The rule
//!
//! - A module's path comes from its file's path inside its target (`src/arm/mod.rs` is `arm`,
//!   `src/arm/disks.rs` is `arm::disks`), plus the inline modules written inside it
//!   (`mod tests { .. }` in `src/arm/disks.rs` is `arm::disks::tests`).
//! - There is an edge A -> B when A's code (not its comments or strings) names a path that starts
//!   with `crate::`, `super::` or `self::` (a `use`, with its `{..}` groups, or a path in code),
//!   or `use`s a relative path to a child module, and that path resolves into module B: the
//!   longest prefix of the path that is a known module.
//! - A path to an item a module re-exports (`pub use`, any visibility: `super::Emulator` where
//!   the parent has `pub use emulator::Emulator`) is followed to the module the re-export names,
//!   so re-exports cannot hide a cycle. Glob re-exports are not followed.
//! - No edge is counted between a module and its ancestors or descendants: a parent declares its
//!   children (`mod x;` is not a use), re-exports them (`pub use self::x::Item`), and children
//!   use their parent's items (`use super::*`).
//! - A cycle is a circle of such edges, reported as `target: a -> b -> a` (`crate` is the root;
//!   at most a thousand per target). How a crate's files split into targets: [`targets`].
//!
//! Paths that start with a name brought in by a `use` (`use super::sibling; sibling::f()`)
//! already have their edge from that `use`. Macros' `$crate::` is not an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One compilation target's modules and the edges between them.
#[derive(Debug, Default)]
pub struct Graph {
    /// Every module (`""` is the crate root), with the modules it uses.
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

/// A source file of one target: its module path and its text.
pub struct ModuleFile {
    /// The module's path, segments joined by `::` (`""` for the target's root file).
    pub module: String,
    /// The file's text.
    pub text: String,
}

/// A path some code names.
#[derive(Debug)]
struct Use {
    /// The module whose code names it (inline modules included).
    from: String,
    /// The path's absolute segments (`crate::`, `super::` and `self::` resolved; a `use` of a
    /// relative path is read as starting at `from`).
    path: Vec<String>,
    /// Whether it was written as a relative `use` (`use child::X`, or an outside crate's path).
    relative: bool,
    /// The name a `pub use` (any visibility) re-exports it as.
    exported_as: Option<String>,
}

/// The module path of `file` inside a target whose root file lives in `tree` (`None` when the
/// file is not under it): `arm/mod.rs` -> `arm`, `arm/disks.rs` -> `arm::disks`, `lib.rs` -> ``.
pub fn module_path(tree: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(tree).ok()?;
    let mut segments: Vec<String> = relative
        .iter()
        .map(|segment| segment.to_string_lossy().into_owned())
        .collect();
    let last = segments.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if !(segments.is_empty() && matches!(stem, "lib" | "main")) && stem != "mod" {
        segments.push(stem.to_owned());
    }
    Some(segments.join("::"))
}

/// Builds the module graph of one target from its files.
pub fn graph(files: &[ModuleFile]) -> Graph {
    let uses: Vec<Use> = files
        .iter()
        .flat_map(|file| scan(&file.module, &file.text))
        .collect();
    let mut known: BTreeSet<String> = files.iter().map(|f| f.module.clone()).collect();
    known.extend(uses.iter().map(|found| found.from.clone()));
    // A relative `use` names a child module, or else an outside crate: only the first counts.
    let uses: Vec<Use> = uses
        .into_iter()
        .filter(|found| {
            let depth = found.from.split("::").filter(|s| !s.is_empty()).count();
            !found.relative
                || found
                    .path
                    .get(..=depth)
                    .is_some_and(|child| known.contains(&child.join("::")))
        })
        .collect();
    let reexports: BTreeMap<(String, String), Vec<String>> = uses
        .iter()
        .filter_map(|found| {
            let name = found.exported_as.clone()?;
            Some(((found.from.clone(), name), found.path.clone()))
        })
        .collect();
    let mut result = Graph::default();
    for module in &known {
        result.edges.entry(module.clone()).or_default();
    }
    for Use { from, path, .. } in uses {
        let Some(to) = resolve(&known, &reexports, &path) else {
            continue;
        };
        if !is_ancestor_or_self(&from, &to) && !is_ancestor_or_self(&to, &from) {
            result.edges.entry(from).or_default().insert(to);
        }
    }
    result
}

/// Every elementary cycle of the graph, each once, starting at its smallest module and ending
/// where it started (`["a", "b", "a"]`; the root module is named `crate`).
pub fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    const LIMIT: usize = 1000;
    let nodes: Vec<&String> = graph.edges.keys().collect();
    let mut found = Vec::new();
    for start in 0..nodes.len() {
        let mut path = vec![start];
        circles_from(graph, &nodes, start, &mut path, &mut found, LIMIT);
    }
    found
        .into_iter()
        .map(|circle| {
            circle
                .iter()
                .chain(circle.first())
                .map(|index| display(nodes[*index]).to_owned())
                .collect()
        })
        .collect()
}

fn circles_from(
    graph: &Graph,
    nodes: &[&String],
    start: usize,
    path: &mut Vec<usize>,
    found: &mut Vec<Vec<usize>>,
    limit: usize,
) {
    let Some(current) = path.last().map(|index| nodes[*index]) else {
        return;
    };
    for next in graph.edges.get(current).into_iter().flatten() {
        if found.len() >= limit {
            return;
        }
        let Some(next_index) = nodes.iter().position(|node| *node == next) else {
            continue;
        };
        if next_index == start {
            found.push(path.clone());
        } else if next_index > start && !path.contains(&next_index) {
            path.push(next_index);
            circles_from(graph, nodes, start, path, found, limit);
            path.pop();
        }
    }
}

fn display(module: &str) -> &str {
    if module.is_empty() { "crate" } else { module }
}

fn is_ancestor_or_self(ancestor: &str, module: &str) -> bool {
    ancestor.is_empty()
        || module == ancestor
        || module
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.starts_with("::"))
}

/// The module `path` (absolute segments) names: its longest prefix that is a known module, or,
/// when the next segment is an item that module re-exports (`pub use`), the module the
/// re-export names (followed a few steps).
fn resolve(
    known: &BTreeSet<String>,
    reexports: &BTreeMap<(String, String), Vec<String>>,
    path: &[String],
) -> Option<String> {
    let mut path = path.to_vec();
    let mut module = None;
    for _ in 0..8 {
        let length = (0..=path.len())
            .rev()
            .find(|length| known.contains(&path[..*length].join("::")))?;
        let prefix = path[..length].join("::");
        let target = path
            .get(length)
            .and_then(|name| reexports.get(&(prefix.clone(), name.clone())));
        module = Some(prefix);
        match target {
            Some(target) if !path.starts_with(target) => {
                path = target.iter().chain(&path[length + 1..]).cloned().collect();
            }
            _ => break,
        }
    }
    module
}

/// The paths `text` (the file of module `module`) names, as (the module whose code names it,
/// the absolute path's segments).
fn scan(module: &str, text: &str) -> Vec<Use> {
    let code: Vec<char> = code_only(text).chars().collect();
    let file_module: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_owned).collect()
    };
    // Inline modules open at a brace depth and close when it drops back.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut found = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let c = code[i];
        if c == '{' {
            depth += 1;
            i += 1;
        } else if c == '}' {
            depth -= 1;
            if inline.last().is_some_and(|(_, open)| *open == depth) {
                inline.pop();
            }
            i += 1;
        } else if is_ident_start(c) && (i == 0 || !is_path_char(code[i - 1])) {
            let (word, end) = ident(&code, i);
            let current: Vec<String> = file_module
                .iter()
                .cloned()
                .chain(inline.iter().map(|(name, _)| name.clone()))
                .collect();
            if word == "mod" {
                let (name, after) = ident(&code, skip_space(&code, end));
                let brace = skip_space(&code, after);
                if !name.is_empty() && code.get(brace) == Some(&'{') {
                    inline.push((name, depth));
                    depth += 1;
                    i = brace + 1;
                    continue;
                }
            }
            if word == "use" {
                let exported = is_exported(&code, i);
                let mut paths = Vec::new();
                let next = path_tree(&code, skip_space(&code, end), &mut Vec::new(), &mut paths);
                let from = current.join("::");
                for (segments, alias) in paths {
                    let relative = !matches!(
                        segments.first().map(String::as_str),
                        Some("crate" | "super" | "self")
                    );
                    let path = if relative {
                        current
                            .iter()
                            .chain(
                                segments
                                    .iter()
                                    .filter(|s| !matches!(s.as_str(), "self" | "*")),
                            )
                            .cloned()
                            .collect()
                    } else {
                        match absolute(&current, &segments) {
                            Some(path) => path,
                            None => continue,
                        }
                    };
                    let name = alias.or_else(|| {
                        segments
                            .last()
                            .filter(|last| !matches!(last.as_str(), "self" | "*"))
                            .cloned()
                    });
                    found.push(Use {
                        from: from.clone(),
                        path,
                        relative,
                        exported_as: name.filter(|_| exported),
                    });
                }
                i = next.max(end);
                continue;
            }
            if matches!(word.as_str(), "crate" | "super" | "self")
                && (i == 0 || code[i - 1] != '$')
                && starts_with(&code, skip_space(&code, end), "::")
            {
                let mut relative = Vec::new();
                let next = path_tree(&code, i, &mut Vec::new(), &mut relative);
                let from = current.join("::");
                for (segments, _) in relative {
                    if let Some(path) = absolute(&current, &segments) {
                        found.push(Use {
                            from: from.clone(),
                            path,
                            relative: false,
                            exported_as: None,
                        });
                    }
                }
                i = next.max(end);
                continue;
            }
            i = end;
        } else {
            i += 1;
        }
    }
    found
}

/// Whether the `use` at `at` is a re-export: `pub` or `pub(..)` comes right before it.
fn is_exported(code: &[char], at: usize) -> bool {
    let mut end = code[..at]
        .iter()
        .rposition(|c| !c.is_whitespace())
        .map_or(0, |p| p + 1);
    if end > 0 && code[end - 1] == ')' {
        let Some(open) = code[..end].iter().rposition(|c| *c == '(') else {
            return false;
        };
        end = open;
    }
    let start = end.saturating_sub(3);
    code[start..end].iter().collect::<String>() == "pub"
        && (start == 0 || !is_path_char(code[start - 1]))
}

/// Resolves `crate::`, `super::` and `self::` against the module `current`.
fn absolute(current: &[String], segments: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut rest = segments;
    match segments.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &segments[1..];
        }
        Some("self") => {
            base = current.to_vec();
            rest = &segments[1..];
        }
        Some("super") => {
            base = current.to_vec();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(
        rest.iter()
            .filter(|s| !matches!(s.as_str(), "self" | "*"))
            .cloned(),
    );
    Some(base)
}

/// Reads a path (with `{..}` groups) at `i`, pushing every full path under `prefix` into
/// `found`; returns where it ends.
fn path_tree(
    code: &[char],
    mut i: usize,
    prefix: &mut Vec<String>,
    found: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    let depth = prefix.len();
    loop {
        i = skip_space(code, i);
        match code.get(i) {
            Some('{') => {
                i += 1;
                loop {
                    i = skip_space(code, i);
                    match code.get(i) {
                        Some('}') => {
                            i += 1;
                            break;
                        }
                        Some(',') => i += 1,
                        None => break,
                        _ => {
                            let before = i;
                            i = path_tree(code, i, prefix, found);
                            if i == before {
                                i += 1;
                            }
                        }
                    }
                }
                prefix.truncate(depth);
                return i;
            }
            Some('*') => {
                prefix.push("*".to_owned());
                found.push((prefix.clone(), None));
                prefix.truncate(depth);
                return i + 1;
            }
            Some(c) if is_ident_start(*c) => {
                let (word, end) = ident(code, i);
                prefix.push(word);
                i = skip_space(code, end);
                if starts_with(code, i, "::") {
                    i += 2;
                } else {
                    // `B as C`: the alias names nothing, but is what a `pub use` exports.
                    let (next, after) = ident(code, i);
                    if next == "as" {
                        let (alias, alias_end) = ident(code, skip_space(code, after));
                        found.push((prefix.clone(), Some(alias)));
                        prefix.truncate(depth);
                        return alias_end;
                    }
                    found.push((prefix.clone(), None));
                    prefix.truncate(depth);
                    return end;
                }
            }
            _ => {
                if prefix.len() > depth {
                    found.push((prefix.clone(), None));
                }
                prefix.truncate(depth);
                return i;
            }
        }
    }
}

/// `text` with comments, string and char literals blanked (newlines kept).
pub fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, from: &[char]| {
        out.extend(from.iter().map(|c| if *c == '\n' { '\n' } else { ' ' }));
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let start = i;
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if starts_with(&chars, i, "/*") {
                    depth += 1;
                    i += 2;
                } else if starts_with(&chars, i, "*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '\'' {
            if next == Some('\\') {
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                out.push(c);
                i += 1;
                continue;
            }
        } else if let Some(hashes) = raw_string_hashes(&chars, i) {
            // r"..", r#".."#, br".."
            i = chars[i..]
                .iter()
                .position(|c| *c == '"')
                .map_or(chars.len(), |p| i + p + 1);
            let closing: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            while i < chars.len() && !starts_with(&chars, i, &closing) {
                i += 1;
            }
            i = (i + closing.chars().count()).min(chars.len());
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(chars.len());
        } else {
            out.push(c);
            i += 1;
            continue;
        }
        blank(&mut out, &chars[start..i.min(chars.len())]);
    }
    out
}

/// The number of `#`s of a raw string starting at `i` (`r"`, `r#"`, `br"`), if one does.
fn raw_string_hashes(chars: &[char], i: usize) -> Option<usize> {
    if i > 0 && is_path_char(chars[i - 1]) {
        return None;
    }
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|c| **c == '#').count();
    (chars.get(j + hashes) == Some(&'"')).then_some(hashes)
}

fn ident(code: &[char], i: usize) -> (String, usize) {
    let end = code[i.min(code.len())..]
        .iter()
        .position(|c| !(c.is_alphanumeric() || *c == '_'))
        .map_or(code.len(), |p| i + p);
    (code[i.min(end)..end].iter().collect(), end)
}

fn skip_space(code: &[char], i: usize) -> usize {
    code[i.min(code.len())..]
        .iter()
        .position(|c| !c.is_whitespace())
        .map_or(code.len(), |p| i + p)
}

fn starts_with(code: &[char], i: usize, pattern: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    code.get(i..i + pattern.len()) == Some(&pattern[..])
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

/// A character that continues a path: a `crate` after `foo::` or `x_` is not a path's start.
fn is_path_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == ':'
}

/// One compilation target: a label for reports, and its files.
pub struct Target {
    /// Where it lives, e.g. `model` or `sandbox/tests/conformance`.
    pub label: String,
    /// The files of its module tree.
    pub files: Vec<ModuleFile>,
}

/// Splits a crate's files into its targets. A `lib.rs` or `main.rs` is a target's root and its
/// folder the target's tree (a `main.rs` beside a `lib.rs` is a binary of one file: the folder's
/// other files are the library's). A file directly in the crate's `tests/`, `benches/` or
/// `examples/` is a root whose tree is the folder of its name. Every other file belongs to the
/// root with the deepest tree that holds it.
pub fn targets(root: &Path, crate_dir: &str, files: Vec<(PathBuf, String)>) -> Vec<Target> {
    let crate_path = root.join(crate_dir);
    let mut roots: Vec<(PathBuf, PathBuf)> = Vec::new();
    let paths: BTreeSet<PathBuf> = files.iter().map(|(path, _)| path.clone()).collect();
    for path in &paths {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let Some(dir) = path.parent() else { continue };
        let top_level = ["tests", "benches", "examples"]
            .iter()
            .any(|folder| dir == crate_path.join(folder));
        if name == "lib.rs" || (name == "main.rs" && !paths.contains(&dir.join("lib.rs"))) {
            roots.push((path.clone(), dir.to_path_buf()));
        } else if name == "main.rs" {
            roots.push((path.clone(), path.clone()));
        } else if top_level {
            let stem = name.trim_end_matches(".rs");
            roots.push((path.clone(), dir.join(stem)));
        }
    }
    let mut grouped: BTreeMap<PathBuf, Target> = BTreeMap::new();
    for (path, text) in files {
        let owner = roots
            .iter()
            .filter(|(root_file, tree)| *root_file == path || path.starts_with(tree))
            .max_by_key(|(root_file, tree)| (*root_file == path, tree.components().count()));
        let Some((root_file, tree)) = owner else {
            continue;
        };
        let module = if *root_file == path {
            String::new()
        } else {
            match module_path(tree, &path) {
                Some(module) => module,
                None => continue,
            }
        };
        let label_dir = if root_file == tree {
            root_file.clone()
        } else if tree.ends_with("src") {
            tree.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            tree.clone()
        };
        let label = label_dir
            .strip_prefix(root)
            .unwrap_or(&label_dir)
            .to_string_lossy()
            .into_owned();
        grouped
            .entry(root_file.clone())
            .or_insert_with(|| Target {
                label,
                files: Vec::new(),
            })
            .files
            .push(ModuleFile { module, text });
    }
    grouped.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(files: &[(&str, &str)], expected: &[&str]) {
        let files: Vec<ModuleFile> = files
            .iter()
            .map(|(module, text)| ModuleFile {
                module: (*module).to_owned(),
                text: (*text).to_owned(),
            })
            .collect();
        let found: Vec<String> = cycles(&graph(&files))
            .iter()
            .map(|cycle| cycle.join(" -> "))
            .collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn module_paths_come_from_file_paths() {
        let tree = Path::new("/w/sandbox/src");
        let path = |file: &str| module_path(tree, &tree.join(file));
        assert_eq!(path("lib.rs").as_deref(), Some(""));
        assert_eq!(path("arm/mod.rs").as_deref(), Some("arm"));
        assert_eq!(path("arm/disks.rs").as_deref(), Some("arm::disks"));
        assert_eq!(
            path("arm/virtual_machines/spec.rs").as_deref(),
            Some("arm::virtual_machines::spec")
        );
        assert_eq!(module_path(tree, Path::new("/w/model/src/lib.rs")), None);
    }

    #[test]
    fn two_siblings_using_each_other_are_a_cycle() {
        check(
            &[
                ("", "mod a; mod b;"),
                ("a", "use crate::b::Thing;"),
                ("b", "use super::a::Other;"),
            ],
            &["a -> b -> a"],
        );
    }

    #[test]
    fn a_circle_of_three_is_reported_once() {
        check(
            &[
                ("", ""),
                ("a", "fn f() { crate::b::g() }"),
                ("b", "use crate::{c::{self, X}};"),
                ("c", "use crate::a;"),
            ],
            &["a -> b -> c -> a"],
        );
    }

    #[test]
    fn every_cycle_through_a_shared_module_is_reported() {
        check(
            &[
                ("", ""),
                ("a", "use crate::{b::X, c::Y};"),
                ("b", "use crate::a::Z;"),
                ("c", "use crate::a::W;"),
            ],
            &["a -> b -> a", "a -> c -> a"],
        );
    }

    #[test]
    fn an_item_a_parent_re_exports_counts_as_a_use_of_the_module_defining_it() {
        check(
            &[
                (
                    "",
                    "mod a; mod b; pub use a::A;\npub(crate) use self::b::{B as Bee};",
                ),
                ("a", "use crate::Bee;"),
                ("b", "use super::A; use std::fmt;"),
            ],
            &["a -> b -> a"],
        );
        // Relative uses of outside crates and of the module's own children are not edges.
        check(
            &[
                ("", "mod a; mod b;"),
                ("a", "use b::X; use serde::Serialize;"),
                ("b", "use crate::a::Y;"),
            ],
            &[],
        );
    }

    #[test]
    fn parents_and_children_are_not_cycles() {
        check(
            &[
                ("", "pub use self::arm::Emulator; use crate::arm::disks;"),
                (
                    "arm",
                    "mod disks; pub use disks::Disk; use self::disks::put;",
                ),
                (
                    "arm::disks",
                    "use super::*; use crate::arm::Emulator; use crate::Thing;",
                ),
            ],
            &[],
        );
    }

    #[test]
    fn comments_strings_and_macros_are_not_uses() {
        check(
            &[
                ("", ""),
                (
                    "a",
                    "// use crate::b;\n/* crate::b::X */ const S: &str = \"crate::b::X\";",
                ),
                (
                    "b",
                    "macro_rules! m { () => { $crate::a::X } } use crate::a::Y; let r = r#\"x\"#;",
                ),
            ],
            &[],
        );
    }

    #[test]
    fn inline_test_modules_resolve_super_from_themselves() {
        // `super::super::b` inside `a::tests` names `b`; `super::*` names `a`, its parent.
        check(
            &[
                ("", ""),
                (
                    "a",
                    "fn f() {}\n#[cfg(test)]\nmod tests { use super::*; use super::super::b::X; }",
                ),
                ("b", "use crate::a::f;"),
            ],
            &[],
        );
        check(
            &[
                ("", ""),
                (
                    "a",
                    "mod inner { use crate::b::X; }\nfn f() { let c = '{'; }",
                ),
                ("b", "use crate::a::inner::Y;"),
            ],
            &["a::inner -> b -> a::inner"],
        );
    }

    #[test]
    fn paths_in_groups_and_code_are_uses() {
        let files = [ModuleFile {
            module: "x::y".to_owned(),
            text: "use super::{z::{A, B as C}, w};\nfn f() -> crate::v::T { self::u::g() }"
                .to_owned(),
        }];
        let uses: BTreeSet<Vec<String>> = scan(&files[0].module, &files[0].text)
            .into_iter()
            .map(|found| found.path)
            .collect();
        let expected: BTreeSet<Vec<String>> = [
            vec!["x", "z", "A"],
            vec!["x", "z", "B"],
            vec!["x", "w"],
            vec!["v", "T"],
            vec!["x", "y", "u", "g"],
        ]
        .into_iter()
        .map(|path| path.into_iter().map(str::to_owned).collect())
        .collect();
        assert_eq!(uses, expected);
    }

    #[test]
    fn targets_split_a_crate_by_root_file() {
        let root = Path::new("/w");
        let file = |path: &str| (root.join(path), String::new());
        let targets = targets(
            root,
            "sandbox",
            vec![
                file("sandbox/src/lib.rs"),
                file("sandbox/src/main.rs"),
                file("sandbox/src/arm/mod.rs"),
                file("sandbox/tests/kube_actors.rs"),
                file("sandbox/tests/kube_actors/arm.rs"),
                file("sandbox/tests/conformance/main.rs"),
                file("sandbox/tests/conformance/disks.rs"),
            ],
        );
        let summary: Vec<(String, Vec<String>)> = targets
            .iter()
            .map(|t| {
                (
                    t.label.clone(),
                    t.files.iter().map(|f| f.module.clone()).collect(),
                )
            })
            .collect();
        let owned = |label: &str, modules: &[&str]| {
            (
                label.to_owned(),
                modules.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            summary,
            vec![
                owned("sandbox", &["", "arm"]),
                owned("sandbox/src/main.rs", &[""]),
                owned("sandbox/tests/conformance", &["", "disks"]),
                owned("sandbox/tests/kube_actors", &["", "arm"]),
            ]
        );
    }
}
