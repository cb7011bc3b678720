//! The cluster's name: part of every workflow ID, Azure tag value and Kubernetes label value.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest cluster name we accept. It appears inside machine names, which must stay within
/// Azure's 64-character VM name and Kubernetes' 63-character label values.
pub const MAX_CLUSTER_NAME_LEN: usize = 40;

/// A validated cluster name: 1 to 40 characters of lowercase letters, digits and `-`, starting
/// with a letter and not ending with `-` (a DNS-1123 label that Azure tags accept too).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClusterName(String);

/// A name that Azure or Kubernetes would refuse, with the field it came from and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {} {problem}; {fix}", crate::text::quoted(value))]
pub struct InvalidName {
    /// The configuration field or argument that held the name.
    pub field: String,
    /// The value as given.
    pub value: String,
    /// What is wrong with it.
    pub problem: &'static str,
    /// What to do instead.
    pub fix: &'static str,
}

impl ClusterName {
    /// Validates `value` as the cluster name given in `field` (used in the error message).
    pub fn parse(field: &str, value: &str) -> Result<Self, InvalidName> {
        let invalid = |problem, fix| InvalidName {
            field: field.to_owned(),
            value: value.to_owned(),
            problem,
            fix,
        };
        const FIX: &str = "use 1-40 lowercase letters, digits and '-', starting with a letter (e.g. \"prod-weu\")";
        match label_problem(value, MAX_CLUSTER_NAME_LEN, "is longer than 40 characters") {
            Some(problem) => Err(invalid(problem, FIX)),
            None => Ok(Self(value.to_owned())),
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What keeps `value` from being a name both Azure and Kubernetes accept — a DNS label of at most
/// `max_len` characters that starts with a lowercase letter — or `None` when nothing does.
/// `too_long` is the problem to report for a long name (it names the limit).
pub(crate) fn label_problem(
    value: &str,
    max_len: usize,
    too_long: &'static str,
) -> Option<&'static str> {
    if value.is_empty() {
        Some("is empty")
    } else if value.len() > max_len {
        Some(too_long)
    } else if !value.starts_with(|c: char| c.is_ascii_lowercase()) {
        Some("does not start with a lowercase letter")
    } else if value.ends_with('-') {
        Some("ends with '-'")
    } else if !value
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        Some("contains a character other than a-z, 0-9 and '-'")
    } else {
        None
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for ClusterName {
    type Error = InvalidName;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse("cluster", &value)
    }
}

impl From<ClusterName> for String {
    fn from(name: ClusterName) -> Self {
        name.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(value: &str, expected_problem: Option<&str>) {
        let result = ClusterName::parse("cluster.name", value);
        match (result, expected_problem) {
            (Ok(name), None) => assert_eq!(name.as_str(), value),
            (Err(err), Some(problem)) => {
                assert_eq!(err.problem, problem, "for {value:?}");
                let message = err.to_string();
                assert!(message.starts_with("cluster.name: "), "{message}");
                assert!(
                    message.contains("e.g."),
                    "the message shows a fix: {message}"
                );
            }
            (result, expected) => panic!("{value:?}: got {result:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn accepts_and_refuses_names_as_azure_and_kubernetes_would() {
        let table: &[(&str, Option<&str>)] = &[
            ("dev", None),
            ("prod-weu-2", None),
            ("a", None),
            (&"a".repeat(40), None),
            ("", Some("is empty")),
            (&"a".repeat(41), Some("is longer than 40 characters")),
            ("2fast", Some("does not start with a lowercase letter")),
            ("-x", Some("does not start with a lowercase letter")),
            ("Prod", Some("does not start with a lowercase letter")),
            ("prod-", Some("ends with '-'")),
            (
                "prod_weu",
                Some("contains a character other than a-z, 0-9 and '-'"),
            ),
            (
                "prod.weu",
                Some("contains a character other than a-z, 0-9 and '-'"),
            ),
            (
                "prodWeu",
                Some("contains a character other than a-z, 0-9 and '-'"),
            ),
        ];
        for (value, expected) in table {
            check(value, *expected);
        }
    }

    #[test]
    fn deserializing_validates() {
        let ok: ClusterName = serde_json::from_str("\"dev\"").expect("valid name");
        assert_eq!(ok.as_str(), "dev");
        let err = serde_json::from_str::<ClusterName>("\"Dev\"").expect_err("invalid name");
        assert!(
            err.to_string()
                .contains("does not start with a lowercase letter")
        );
    }

    proptest! {
        #[test]
        fn every_accepted_name_is_a_dns_label_and_a_valid_tag(value in "[a-z0-9-]{0,45}") {
            if let Ok(name) = ClusterName::parse("cluster", &value) {
                let s = name.as_str();
                prop_assert!(!s.is_empty() && s.len() <= 40);
                prop_assert!(s.starts_with(|c: char| c.is_ascii_lowercase()));
                prop_assert!(!s.ends_with('-'));
                prop_assert!(!s.contains(['/', '<', '>', '%', '&', '\\', '?']));
            }
        }
    }
}
