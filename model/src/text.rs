//! Text for people: one way to render an error and its causes, a value quoted, a duration.
//!
//! The CLI, the workflows' failure reasons (from Temporal's failure protos), the activities'
//! failures and the worker's logs all render an error with [`error_chain`] or, where the chain
//! is a list of messages already, [`join_messages`], so each says the same thing. Nothing here
//! uses Rust's debug formatting: `None`, `Some(..)` and struct dumps are not text for people
//! (checked by `tests/tidy`).

use std::time::Duration;

/// Messages that wrap a cause without saying anything of their own; [`join_messages`] drops
/// them. Compared ignoring ASCII case.
pub const GENERIC_WRAPPERS: [&str; 2] = ["activity task failed", "child workflow execution failed"];

/// `messages`, outermost first, joined with `: `: empty messages, the generic wrappers
/// ([`GENERIC_WRAPPERS`]) and a message already said by an earlier one (contained in it) are
/// dropped. Empty when nothing is left.
pub fn join_messages<I, S>(messages: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut parts: Vec<String> = Vec::new();
    for message in messages {
        let message = message.as_ref().trim();
        let generic = message.is_empty()
            || GENERIC_WRAPPERS
                .iter()
                .any(|wrapper| message.eq_ignore_ascii_case(wrapper));
        if !generic && !parts.iter().any(|part| part.contains(message)) {
            parts.push(message.to_owned());
        }
    }
    parts.join(": ")
}

/// `error` and its causes ([`std::error::Error::source`]) as one line, by the rule of
/// [`join_messages`]: `reading Node web-abcde failed: connection refused`.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    join_messages(std::iter::successors(Some(error), |e| e.source()).map(|e| e.to_string()))
}

/// `value` between double quotes, with quotes, backslashes and control characters escaped the
/// way Rust writes them (`\"`, `\\`, `\n`), so an empty, blank or odd value stays visible:
/// `"20x"`, `""`, `"a\tb"`.
pub fn quoted(value: &str) -> String {
    let mut text = String::with_capacity(value.len() + 2);
    text.push('"');
    for c in value.chars() {
        match c {
            '"' => text.push_str("\\\""),
            '\\' => text.push_str("\\\\"),
            c if c.is_control() => text.extend(c.escape_debug()),
            c => text.push(c),
        }
    }
    text.push('"');
    text
}

/// `duration` the way a person writes it: `30s`, `2m 30s`, `1h`, `250ms`; zero is `0s`.
pub fn duration(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Chain {
        message: &'static str,
        source: Option<Box<Chain>>,
    }

    impl std::fmt::Display for Chain {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.message)
        }
    }

    impl std::error::Error for Chain {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.source
                .as_deref()
                .map(|s| s as &(dyn std::error::Error + 'static))
        }
    }

    /// An error whose messages are `messages`, outermost first.
    fn chain(messages: &[&'static str]) -> Chain {
        let mut error: Option<Chain> = None;
        for message in messages.iter().rev() {
            error = Some(Chain {
                message,
                source: error.map(Box::new),
            });
        }
        error.unwrap_or(Chain {
            message: "",
            source: None,
        })
    }

    /// The table both renderings are checked against: messages outermost first, and the text.
    const CHAINS: [(&[&str], &str); 8] = [
        (
            &["reading Node web-abcde failed"],
            "reading Node web-abcde failed",
        ),
        (
            &["reading Node web-abcde failed", "connection refused"],
            "reading Node web-abcde failed: connection refused",
        ),
        (
            &["Activity task failed", "VM m failed", "AllocationFailed"],
            "VM m failed: AllocationFailed",
        ),
        (
            &[
                "Child Workflow execution failed",
                "creating machine m failed at step register-node",
            ],
            "creating machine m failed at step register-node",
        ),
        (&["ApiError: not found", "not found"], "ApiError: not found"),
        (&["outer", "", "  inner  "], "outer: inner"),
        (&["ACTIVITY TASK FAILED"], ""),
        (&[], ""),
    ];

    #[test]
    fn error_chain_joins_causes_drops_wrappers_and_repeats() {
        for (messages, expected) in CHAINS {
            assert_eq!(error_chain(&chain(messages)), expected, "{messages:?}");
            assert_eq!(join_messages(messages), expected, "{messages:?}");
        }
    }

    #[test]
    fn quoted_escapes_what_would_hide_the_value() {
        let table = [
            ("20x", r#""20x""#),
            ("", r#""""#),
            ("a\tb\n", r#""a\tb\n""#),
            (r#"say "hi"\"#, r#""say \"hi\"\\""#),
            ("héllo", r#""héllo""#),
        ];
        for (value, expected) in table {
            assert_eq!(quoted(value), expected);
            assert_eq!(
                quoted(value),
                format!("{value:?}"),
                "like Rust's own escaping"
            );
        }
    }

    #[test]
    fn durations_read_as_people_write_them() {
        let table = [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_secs(30), "30s"),
            (Duration::from_secs(150), "2m 30s"),
            (Duration::from_secs(3600), "1h"),
        ];
        for (value, expected) in table {
            assert_eq!(duration(value), expected);
        }
    }
}
