//! The part of the Kusto query language (KQL) the emulator's Resource Graph answers: a query on
//! the `Resources` table, then any number of `where` (comparisons joined by `and`), `project`,
//! `order by`/`sort by` and `limit`/`take` stages. A comparison is a column path (`type`,
//! `tags['nodewright.io-pool']`, `properties.extended.instanceView.powerState.code`), one of
//! `==` `!=` (case-sensitive) `=~` `!~` (case-insensitive) and a string literal. Anything else
//! (other operators, functions, joins, `or`) is refused with the token it stopped at, as Azure
//! refuses a query it cannot parse: a client of the emulator learns at once that it asked for
//! more than the emulator does, instead of getting an answer Azure would not give.

use std::cmp::Ordering;

use serde_json::{Map, Value};

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    stages: Vec<Stage>,
}

/// Why a query was refused: the message names the token and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QueryError(String);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Stage {
    Where(Vec<Comparison>),
    Project(Vec<Column>),
    OrderBy { path: Vec<String>, descending: bool },
    Limit(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparison {
    path: Vec<String>,
    op: Op,
    literal: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equal,
    EqualIgnoringCase,
    NotEqual,
    NotEqualIgnoringCase,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Column {
    name: String,
    path: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Text(String),
    Number(usize),
    Symbol(&'static str),
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Self::Word(word) => format!("'{word}'"),
            Self::Text(text) => format!("the string '{text}'"),
            Self::Number(number) => format!("the number {number}"),
            Self::Symbol(symbol) => format!("'{symbol}'"),
        }
    }
}

/// The symbols, longest first so that `==` is not read as `=` twice.
const SYMBOLS: &[&str] = &[
    "==", "=~", "!=", "!~", "|", ",", ".", "[", "]", "(", ")", "=",
];

fn tokenize(text: &str) -> Result<Vec<Token>, QueryError> {
    let mut tokens = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        let Some(first) = rest.chars().next() else {
            return Ok(tokens);
        };
        if first.is_ascii_alphabetic() || first == '_' {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            tokens.push(Token::Word(rest[..end].to_owned()));
            rest = &rest[end..];
        } else if first.is_ascii_digit() {
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let number = rest[..end]
                .parse()
                .map_err(|_| QueryError(format!("the number {} is too large", &rest[..end])))?;
            tokens.push(Token::Number(number));
            rest = &rest[end..];
        } else if first == '\'' || first == '"' {
            let (literal, after) = string_literal(rest, first)?;
            tokens.push(Token::Text(literal));
            rest = after;
        } else if let Some(symbol) = SYMBOLS.iter().find(|s| rest.starts_with(**s)) {
            tokens.push(Token::Symbol(symbol));
            rest = &rest[symbol.len()..];
        } else {
            return Err(QueryError(format!(
                "unexpected character '{first}': the emulator's Resource Graph answers `where`, \
                 `project`, `order by` and `limit` stages with ==, !=, =~ and !~ comparisons"
            )));
        }
    }
}

/// A string literal quoted by `quote` at the start of `text` (backslash escapes), and the text
/// after it.
fn string_literal(text: &str, quote: char) -> Result<(String, &str), QueryError> {
    let mut literal = String::new();
    let mut chars = text.char_indices().skip(1);
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, escaped)) => literal.push(escaped),
                None => break,
            },
            c if c == quote => return Ok((literal, &text[at + c.len_utf8()..])),
            c => literal.push(c),
        }
    }
    Err(QueryError(format!(
        "a string literal opened with {quote} is not closed"
    )))
}

/// The tokens of one stage, read front to back.
struct Cursor {
    tokens: std::collections::VecDeque<Token>,
}

impl Cursor {
    fn next(&mut self, expected: &str) -> Result<Token, QueryError> {
        self.tokens
            .pop_front()
            .ok_or_else(|| QueryError(format!("the query ends where {expected} was expected")))
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.front()
    }

    fn word(&mut self, expected: &str) -> Result<String, QueryError> {
        match self.next(expected)? {
            Token::Word(word) => Ok(word),
            other => Err(unexpected(&other, expected)),
        }
    }

    fn symbol(&mut self, symbol: &'static str) -> Result<(), QueryError> {
        match self.next(&format!("'{symbol}'"))? {
            Token::Symbol(found) if found == symbol => Ok(()),
            other => Err(unexpected(&other, &format!("'{symbol}'"))),
        }
    }

    fn end(&self) -> Result<(), QueryError> {
        match self.peek() {
            None => Ok(()),
            Some(other) => Err(unexpected(other, "'|' or the end of the query")),
        }
    }

    /// A column path: a name, then `.name` or `['name']` steps.
    fn path(&mut self) -> Result<Vec<String>, QueryError> {
        let mut path = vec![self.word("a column name")?];
        loop {
            match self.peek() {
                Some(Token::Symbol(".")) => {
                    self.tokens.pop_front();
                    path.push(self.word("a property name after '.'")?);
                }
                Some(Token::Symbol("[")) => {
                    self.tokens.pop_front();
                    match self.next("a quoted property name after '['")? {
                        Token::Text(name) => path.push(name),
                        other => return Err(unexpected(&other, "a quoted property name")),
                    }
                    self.symbol("]")?;
                }
                _ => return Ok(path),
            }
        }
    }
}

fn unexpected(token: &Token, expected: &str) -> QueryError {
    QueryError(format!(
        "unexpected {} where {expected} was expected",
        token.describe()
    ))
}

/// Parses `text`.
pub fn parse(text: &str) -> Result<Query, QueryError> {
    let tokens = tokenize(text)?;
    let mut parts = tokens.split(|token| *token == Token::Symbol("|"));
    match parts.next() {
        Some([Token::Word(table)]) if table.eq_ignore_ascii_case("resources") => {}
        _ => {
            return Err(QueryError(
                "the query must start with the table `Resources`: the emulator's Resource Graph \
                 holds no other"
                    .to_owned(),
            ));
        }
    }
    let stages = parts
        .map(|part| {
            stage(&mut Cursor {
                tokens: part.iter().cloned().collect(),
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Query { stages })
}

fn stage(cursor: &mut Cursor) -> Result<Stage, QueryError> {
    let operator = cursor.word("a stage (`where`, `project`, `order by`, `limit`)")?;
    let stage = match operator.as_str() {
        "where" => {
            let mut comparisons = vec![comparison(cursor)?];
            while matches!(cursor.peek(), Some(Token::Word(word)) if word == "and") {
                cursor.tokens.pop_front();
                comparisons.push(comparison(cursor)?);
            }
            Stage::Where(comparisons)
        }
        "project" => {
            let mut columns = vec![column(cursor)?];
            while cursor.peek() == Some(&Token::Symbol(",")) {
                cursor.tokens.pop_front();
                columns.push(column(cursor)?);
            }
            Stage::Project(columns)
        }
        "order" | "sort" => {
            let by = cursor.word("'by'")?;
            if by != "by" {
                return Err(unexpected(&Token::Word(by), "'by'"));
            }
            let path = cursor.path()?;
            let descending = match cursor.peek() {
                Some(Token::Word(word)) if word == "asc" || word == "desc" => {
                    let descending = word == "desc";
                    cursor.tokens.pop_front();
                    descending
                }
                // KQL sorts descending unless told otherwise.
                _ => true,
            };
            Stage::OrderBy { path, descending }
        }
        "limit" | "take" => match cursor.next("a row count")? {
            Token::Number(count) => Stage::Limit(count),
            other => return Err(unexpected(&other, "a row count")),
        },
        other => {
            return Err(QueryError(format!(
                "the stage `{other}` is not one the emulator's Resource Graph answers: use \
                 `where`, `project`, `order by` or `limit`"
            )));
        }
    };
    cursor.end()?;
    Ok(stage)
}

fn comparison(cursor: &mut Cursor) -> Result<Comparison, QueryError> {
    let path = cursor.path()?;
    let op = match cursor.next("a comparison (==, !=, =~, !~)")? {
        Token::Symbol("==") => Op::Equal,
        Token::Symbol("=~") => Op::EqualIgnoringCase,
        Token::Symbol("!=") => Op::NotEqual,
        Token::Symbol("!~") => Op::NotEqualIgnoringCase,
        other => return Err(unexpected(&other, "a comparison (==, !=, =~, !~)")),
    };
    let literal = match cursor.next("a string literal")? {
        Token::Text(text) => text,
        other => return Err(unexpected(&other, "a string literal")),
    };
    Ok(Comparison { path, op, literal })
}

fn column(cursor: &mut Cursor) -> Result<Column, QueryError> {
    let path = cursor.path()?;
    if cursor.peek() == Some(&Token::Symbol("=")) {
        cursor.tokens.pop_front();
        let name = match path.as_slice() {
            [name] => name.clone(),
            _ => {
                return Err(QueryError(
                    "a projected column's name must be one word".into(),
                ));
            }
        };
        return Ok(Column {
            name,
            path: cursor.path()?,
        });
    }
    let name = path.last().cloned().unwrap_or_default();
    Ok(Column { name, path })
}

/// The value at `path` in `row`; null when a step is missing.
fn at<'a>(row: &'a Value, path: &[String]) -> &'a Value {
    path.iter().fold(row, |value, step| &value[step.as_str()])
}

/// A value as KQL compares it with a string: strings as they are, numbers and booleans as
/// written; none for null, arrays and objects.
fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

impl Comparison {
    fn holds(&self, row: &Value) -> bool {
        let value = as_text(at(row, &self.path));
        let equal = |ignore_case: bool| {
            value.as_deref().is_some_and(|value| {
                if ignore_case {
                    value.to_lowercase() == self.literal.to_lowercase()
                } else {
                    value == self.literal
                }
            })
        };
        match self.op {
            Op::Equal => equal(false),
            Op::EqualIgnoringCase => equal(true),
            Op::NotEqual => !equal(false),
            Op::NotEqualIgnoringCase => !equal(true),
        }
    }
}

impl Query {
    /// The rows of `table` the query keeps, as it shapes them.
    pub fn run(&self, table: Vec<Value>) -> Vec<Value> {
        let mut rows = table;
        for stage in &self.stages {
            match stage {
                Stage::Where(comparisons) => {
                    rows.retain(|row| comparisons.iter().all(|c| c.holds(row)));
                }
                Stage::Project(columns) => {
                    rows = rows
                        .iter()
                        .map(|row| {
                            let projected: Map<String, Value> = columns
                                .iter()
                                .map(|c| (c.name.clone(), at(row, &c.path).clone()))
                                .collect();
                            Value::Object(projected)
                        })
                        .collect();
                }
                Stage::OrderBy { path, descending } => {
                    rows.sort_by(|a, b| {
                        let order = compare(at(a, path), at(b, path));
                        if *descending { order.reverse() } else { order }
                    });
                }
                Stage::Limit(count) => rows.truncate(*count),
            }
        }
        rows
    }
}

/// Orders two values: nulls first, then by their text.
fn compare(a: &Value, b: &Value) -> Ordering {
    as_text(a).cmp(&as_text(b))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn table() -> Vec<Value> {
        vec![
            json!({"name": "web-b", "type": "microsoft.compute/virtualmachines",
                   "resourceGroup": "rg", "tags": {"nodewright.io-pool": "web"},
                   "properties": {"extended": {"instanceView": {"powerState": {"code": "PowerState/running"}}}}}),
            json!({"name": "web-a", "type": "microsoft.compute/virtualmachines",
                   "resourceGroup": "rg", "tags": {"nodewright.io-pool": "web"},
                   "properties": {}}),
            json!({"name": "db-a", "type": "microsoft.compute/virtualmachines",
                   "resourceGroup": "RG", "tags": {"nodewright.io-pool": "db"}}),
            json!({"name": "nic-a", "type": "microsoft.network/networkinterfaces",
                   "resourceGroup": "rg", "tags": {"nodewright.io-pool": "web"}}),
        ]
    }

    fn names(rows: &[Value]) -> Vec<&str> {
        rows.iter().filter_map(|r| r["name"].as_str()).collect()
    }

    #[test]
    fn where_keeps_the_rows_every_comparison_holds_for() -> Result<(), QueryError> {
        let query = parse(
            "Resources | where type =~ 'Microsoft.Compute/virtualMachines' \
             and resourceGroup =~ 'rg' | where tags['nodewright.io-pool'] == \"web\"",
        )?;
        assert_eq!(names(&query.run(table())), ["web-b", "web-a"]);
        let query = parse("resources | where tags['nodewright.io-pool'] != 'web'")?;
        assert_eq!(names(&query.run(table())), ["db-a"]);
        let query = parse("Resources | where resourceGroup == 'RG'")?;
        assert_eq!(names(&query.run(table())), ["db-a"], "== minds the case");
        let query = parse("Resources | where resourceGroup !~ 'rg'")?;
        assert!(query.run(table()).is_empty());
        Ok(())
    }

    #[test]
    fn project_order_and_limit_shape_the_rows() -> Result<(), QueryError> {
        let query = parse(
            "Resources | where type =~ 'microsoft.compute/virtualmachines' \
             | project name, powerState = properties.extended.instanceView.powerState.code \
             | order by name asc | limit 2",
        )?;
        assert_eq!(
            query.run(table()),
            [
                json!({"name": "db-a", "powerState": null}),
                json!({"name": "web-a", "powerState": null}),
            ]
        );
        let query = parse("Resources | project name | sort by name")?;
        assert_eq!(
            names(&query.run(table())),
            ["web-b", "web-a", "nic-a", "db-a"],
            "descending unless told"
        );
        Ok(())
    }

    #[test]
    fn a_literal_keeps_its_escaped_quotes() -> Result<(), QueryError> {
        let query = parse(r"Resources | where name == 'it\'s'")?;
        let rows = query.run(vec![json!({"name": "it's"}), json!({"name": "its"})]);
        assert_eq!(names(&rows), ["it's"]);
        Ok(())
    }

    #[test]
    fn what_the_emulator_does_not_answer_is_refused_naming_the_token() {
        for (query, says) in [
            ("Resources | where name contains 'web'", "'contains'"),
            ("Resources | where a == 'x' or b == 'y'", "'or'"),
            ("ResourceContainers | limit 1", "`Resources`"),
            ("Resources | summarize count()", "`summarize`"),
            ("Resources | where name == 'open", "not closed"),
            ("Resources | where name == 3", "the number 3"),
            ("Resources | where name ==", "ends where a string literal"),
            ("Resources | project a.b = name", "one word"),
            ("Resources | limit x", "a row count"),
            ("Resources | where name == 'a' ; drop", "';'"),
        ] {
            match parse(query) {
                Err(QueryError(message)) => assert!(message.contains(says), "{query}: {message}"),
                Ok(parsed) => panic!("{query} was accepted: {parsed:?}"),
            }
        }
    }
}
