//! Messages for people carry no Rust debug formatting: a `{x:?}` or `{:#?}` in a string literal
//! of non-test code (a `format!`, `write!`, `println!`, `#[error(…)]`, status, audit or failure
//! text) prints `None`, `Some(..)` or a struct dump where a person expects words. `tracing`'s
//! `?field` sigils are not string literals and stay allowed: structured fields are for machines.
//!
//! The scanner is a small Rust lexer: it knows comments, char literals, lifetimes and raw
//! strings well enough to find every string literal with its line, and it blanks the items marked
//! `#[cfg(test)]` (and the files of `#[cfg(test)] mod name;`) so only shipped code is checked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A string literal: the line it starts on (1-based) and its text between the quotes.
#[derive(Debug, PartialEq, Eq)]
pub struct Literal {
    /// The line of its opening quote, 1-based.
    pub line: usize,
    /// Its text between the quotes, escapes as written.
    pub text: String,
}

/// Every string literal of `code` outside comments, with the line it starts on.
pub fn string_literals(code: &str) -> Vec<Literal> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let count_lines = |from: usize, to: usize, chars: &[char]| {
        chars[from..to.min(chars.len())]
            .iter()
            .filter(|c| **c == '\n')
            .count()
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let start = i;
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            line += count_lines(start, i, &chars);
        } else if c == '\'' {
            // A char literal ('"', '\'', '\u{7f}') or a lifetime/label ('a, 'static).
            if next == Some('\\') {
                // The quote, the backslash and the escaped character, then up to the closing quote.
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if let Some((hashes, open)) = raw_string_start(&chars, i) {
            let start_line = line;
            let body_start = open + 1;
            let mut j = body_start;
            let closing =
                |j: usize| chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#'));
            while j < chars.len() && !closing(j) {
                j += 1;
            }
            let text: String = chars[body_start..j.min(chars.len())].iter().collect();
            line += count_lines(i, j, &chars);
            found.push(Literal {
                line: start_line,
                text,
            });
            i = j + 1 + hashes;
        } else if c == '"' {
            let start_line = line;
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            let j = j.min(chars.len());
            let text: String = chars[i + 1..j].iter().collect();
            line += count_lines(i, j, &chars);
            found.push(Literal {
                line: start_line,
                text,
            });
            i = j + 1;
        } else if c.is_alphanumeric() || c == '_' {
            // A whole identifier, so an `r` or `br` inside one does not start a raw string.
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    found
}

/// At `r"`, `r#"`, `br"`, `cr#"`: the number of `#` and the index of the opening quote.
fn raw_string_start(chars: &[char], at: usize) -> Option<(usize, usize)> {
    let mut i = at;
    if matches!(chars.get(i), Some('b' | 'c')) && chars.get(i + 1) == Some(&'r') {
        i += 1;
    }
    if chars.get(i) != Some(&'r') || ident_before(chars, at) {
        return None;
    }
    i += 1;
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    (chars.get(i) == Some(&'"')).then_some((hashes, i))
}

fn ident_before(chars: &[char], at: usize) -> bool {
    at > 0 && (chars[at - 1].is_alphanumeric() || chars[at - 1] == '_')
}

/// The format placeholders of `text` that use debug formatting: `{:?}`, `{x:?}`, `{0:#?}`,
/// `{:>8?}`. `{{` and `}}` are escaped braces, not placeholders.
pub fn debug_placeholders(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        if let Some(escaped) = after.strip_prefix('{') {
            rest = escaped;
            continue;
        }
        let Some(close) = after.find(['}', '{']) else {
            break;
        };
        let spec = &after[..close];
        if after[close..].starts_with('}')
            && spec
                .split_once(':')
                .is_some_and(|(_, format)| format.ends_with('?'))
        {
            found.push(format!("{{{spec}}}"));
        }
        rest = &after[close..];
        if let Some(stripped) = rest.strip_prefix('}') {
            rest = stripped;
        }
    }
    found
}

/// `code` with every item marked `#[cfg(test)]` replaced by blanks (newlines kept, so line
/// numbers stay): a `mod tests { … }`, a test-only `fn`, a `mod tests;` declaration.
pub fn without_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let end = item_end(item).unwrap_or(item.len());
        out.extend(
            item[..end]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The length of the item starting at `item` (its attributes included): up to its `;` when it
/// has no body, else to the brace closing its body. Braces inside string and char literals and
/// line comments are skipped.
fn item_end(item: &str) -> Option<usize> {
    let bytes = item.as_bytes();
    let mut depth = 0usize;
    let mut attribute = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let next = bytes.get(i + 1).copied();
        let raw_hashes = (b == b'r'
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_')))
            .then(|| bytes[i + 1..].iter().take_while(|c| **c == b'#').count())
            .filter(|hashes| bytes.get(i + 1 + hashes) == Some(&b'"'));
        if let Some(hashes) = raw_hashes {
            let closing = format!("\"{}", "#".repeat(hashes));
            let body = i + 2 + hashes;
            i = item
                .get(body..)
                .and_then(|rest| rest.find(&closing))
                .map_or(bytes.len(), |at| body + at + closing.len());
            continue;
        }
        match b {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if next == Some(b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'\'' if next == Some(b'\\') => {
                i += 3;
                while i < bytes.len() && bytes[i] != b'\'' {
                    i += 1;
                }
            }
            b'\'' if bytes.get(i + 2) == Some(&b'\'') => i += 2,
            b'#' if next == Some(b'[') && depth == 0 => {
                attribute += 1;
                i += 1;
            }
            b'[' if attribute > 0 => attribute += 1,
            b']' if attribute > 0 => attribute -= 1,
            _ if attribute > 0 => {}
            b';' if depth == 0 => return Some(i + 1),
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The files `#[cfg(test)] mod name;` declares, as paths to skip (a file, or a folder whose
/// files are all test code).
pub fn test_module_paths(path: &Path, code: &str) -> BTreeSet<PathBuf> {
    let mut paths = BTreeSet::new();
    let Some(dir) = path.parent() else {
        return paths;
    };
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let children = if matches!(stem, "mod" | "lib" | "main") {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        rest = &rest[at + "#[cfg(test)]".len()..];
        let declared = rest.trim_start();
        let declared = declared.strip_prefix("pub(crate) ").unwrap_or(declared);
        if let Some(name) = declared
            .strip_prefix("mod ")
            .and_then(|d| d.split_once(';'))
            .map(|(name, _)| name.trim())
            .filter(|name| name.chars().all(|c| c.is_alphanumeric() || c == '_'))
        {
            paths.insert(children.join(format!("{name}.rs")));
            paths.insert(children.join(name));
        }
    }
    paths
}

#[test]
fn string_literals_are_found_with_their_lines_outside_comments() {
    let code = concat!(
        "// \"{a:?}\" in a comment\n",
        "let c = '\"'; let q = '\\''; fn f<'a>(x: &'a str) {}\n",
        "let s = \"one {x:?}\";\n",
        "/* \"{b:?}\" */ let r = r#\"two \"{y:?}\"\n",
        "three\"#;\n",
        "let e = \"esc \\\" {z:?}\";\n",
        "let for_r = br\"bytes {w:?}\";\n",
    );
    let found: Vec<(usize, String)> = string_literals(code)
        .into_iter()
        .map(|l| (l.line, l.text))
        .collect();
    assert_eq!(
        found,
        vec![
            (3, "one {x:?}".to_owned()),
            (4, "two \"{y:?}\"\nthree".to_owned()),
            (6, "esc \\\" {z:?}".to_owned()),
            (7, "bytes {w:?}".to_owned()),
        ]
    );
}

#[test]
fn debug_placeholders_are_told_from_display_and_escaped_braces() {
    let table: [(&str, &[&str]); 8] = [
        ("{x:?}", &["{x:?}"]),
        ("{:?} and {:#?}", &["{:?}", "{:#?}"]),
        ("{0:>8?}", &["{0:>8?}"]),
        ("{x} {0} {:>8} {name:.2}", &[]),
        ("{{x:?}}", &[]),
        ("json {{\"a\": 1}} {x}", &[]),
        ("what? {x}?", &[]),
        ("{ unclosed :?", &[]),
    ];
    for (text, expected) in table {
        assert_eq!(debug_placeholders(text), expected, "{text}");
    }
}

#[test]
fn test_items_are_blanked_and_lines_kept() {
    let code = concat!(
        "fn shipped() { let _ = \"{a}\"; }\n",
        "#[cfg(test)]\n",
        "mod simulation;\n",
        "fn also_shipped() {}\n",
        "#[cfg(test)]\n",
        "#[allow(dead_code)]\n",
        "fn helper() { if true { let _ = \"}\"; } }\n",
        "fn last() {}\n",
        "#[cfg(test)]\n",
        "mod tests {\n    fn t() { let _ = \"{x:?}\"; }\n}\n",
    );
    let kept = without_test_items(code);
    assert_eq!(kept.lines().count(), code.lines().count());
    assert!(kept.contains("fn shipped()") && kept.contains("fn also_shipped()"));
    assert!(kept.contains("fn last()"));
    assert!(!kept.contains("simulation") && !kept.contains("helper"));
    assert!(!kept.contains("{x:?}") && !kept.contains("mod tests"));
}

#[test]
fn test_module_files_are_found_from_their_declarations() {
    let code = "#[cfg(test)]\nmod simulation;\n#[cfg(test)]\nmod tests {}\n";
    let from_mod = test_module_paths(Path::new("model/src/rollout/mod.rs"), code);
    assert!(from_mod.contains(Path::new("model/src/rollout/simulation.rs")));
    assert!(!from_mod.iter().any(|p| p.ends_with("tests.rs")));
    let from_file = test_module_paths(Path::new("model/src/sweep.rs"), "#[cfg(test)]\nmod tests;");
    assert!(from_file.contains(Path::new("model/src/sweep/tests.rs")));
}
