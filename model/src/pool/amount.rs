//! A number of machines or a percentage of a pool ([`Amount`]), as `maxSurge`, `maxUnavailable`
//! and `maxUnhealthy` are written once validated. A leaf: the rollout strategy and the pool
//! controller's health policy both hold one.

use serde::{Deserialize, Serialize};

/// A number of machines, or a percentage of `replicas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Amount {
    /// An absolute number of machines.
    Count(u32),
    /// A percentage of `replicas`, 0 to 100.
    Percent(u32),
}

impl Amount {
    /// The number of machines this amount stands for in a pool of `replicas`.
    ///
    /// A percentage is rounded up when `round_up` (Kubernetes does so for `maxSurge`) and down
    /// otherwise (for `maxUnavailable`), so that `10%` of 5 machines is a surge of 1 but an
    /// unavailability of 0.
    pub fn resolve(&self, replicas: u32, round_up: bool) -> u32 {
        match *self {
            Amount::Count(count) => count,
            Amount::Percent(percent) => {
                let scaled = u64::from(replicas) * u64::from(percent);
                let machines = if round_up {
                    scaled.div_ceil(100)
                } else {
                    scaled / 100
                };
                u32::try_from(machines).unwrap_or(u32::MAX)
            }
        }
    }

    /// Whether the amount is zero whatever `replicas` is (`0` or `"0%"`).
    pub fn is_zero(&self) -> bool {
        matches!(self, Amount::Count(0) | Amount::Percent(0))
    }

    /// Reads an amount as typed on a command line: `2` (at most
    /// [`crate::limits::MAX_BUDGET_COUNT`]) or `25%` (0% to 100%).
    ///
    /// # Errors
    ///
    /// What is wrong with the text and an example, when it is neither.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let parsed = match text.strip_suffix('%') {
            Some(percent) => percent
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|p| *p <= 100)
                .map(Amount::Percent),
            None => text.parse::<u32>().ok().map(Amount::Count),
        };
        let parsed = parsed.ok_or_else(|| {
            format!(
                "{} is neither a number of machines (e.g. 2) nor a percentage from 0% to 100% (e.g. 25%)",
                crate::text::quoted(text)
            )
        })?;
        parsed
            .check()
            .map_err(|problem| format!("{} {problem}", crate::text::quoted(text)))?;
        Ok(parsed)
    }

    /// Whether the amount is within its bounds: a count of at most
    /// [`crate::limits::MAX_BUDGET_COUNT`] machines, a percentage of at most 100%.
    ///
    /// # Errors
    ///
    /// What is wrong and the fix, e.g. `is more than 1000 machines; give at most 1000 or a
    /// percentage (e.g. 25%)`.
    pub fn check(&self) -> Result<(), String> {
        let max = crate::limits::MAX_BUDGET_COUNT;
        match *self {
            Amount::Count(count) if count > max => Err(format!(
                "is more than {max} machines; give at most {max} or a percentage (e.g. 25%)"
            )),
            Amount::Percent(percent) if percent > 100 => {
                Err("is more than 100%; give a percentage from 0% to 100% (e.g. 25%)".to_owned())
            }
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Amount::Count(count) => write!(f, "{count}"),
            Amount::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn resolves_counts_and_percentages_as_kubernetes_does() {
        let table = [
            // (amount, replicas, round_up, expected)
            (Amount::Count(2), 10, true, 2),
            (Amount::Count(2), 0, false, 2),
            (Amount::Percent(25), 10, true, 3),
            (Amount::Percent(25), 10, false, 2),
            (Amount::Percent(10), 5, true, 1),
            (Amount::Percent(10), 5, false, 0),
            (Amount::Percent(100), 7, false, 7),
            (Amount::Percent(0), 7, true, 0),
            (Amount::Percent(50), 0, true, 0),
            (Amount::Percent(100), u32::MAX, true, u32::MAX),
        ];
        for (amount, replicas, round_up, expected) in table {
            assert_eq!(
                amount.resolve(replicas, round_up),
                expected,
                "{amount:?} of {replicas}, round_up={round_up}"
            );
        }
    }

    #[test]
    fn parses_what_people_type_and_prints_it_back() {
        for (text, expected) in [
            ("2", Ok(Amount::Count(2))),
            (" 0 ", Ok(Amount::Count(0))),
            ("25%", Ok(Amount::Percent(25))),
            ("100%", Ok(Amount::Percent(100))),
        ] {
            assert_eq!(Amount::parse(text), expected, "{text}");
        }
        for bad in ["-1", "101%", "two", "", "1.5", "%", "1001", "4294967295"] {
            let error = Amount::parse(bad).expect_err(bad);
            assert!(error.contains("e.g. 25%"), "{bad}: {error}");
        }
        assert_eq!(Amount::parse("1000"), Ok(Amount::Count(1000)));
        assert_eq!(
            Amount::parse("1001"),
            Err(
                "\"1001\" is more than 1000 machines; give at most 1000 or a percentage (e.g. 25%)"
                    .to_owned()
            )
        );
        assert!(Amount::Percent(101).check().is_err());
        assert_eq!(Amount::Percent(25).to_string(), "25%");
        assert_eq!(Amount::Count(3).to_string(), "3");
    }

    #[test]
    fn serializes_amounts_with_their_kind() {
        let json = serde_json::to_string(&[Amount::Count(1), Amount::Percent(25)])
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(json, r#"[{"count":1},{"percent":25}]"#);
    }

    proptest! {
        #[test]
        fn a_percentage_never_exceeds_replicas_and_rounding_differs_by_at_most_one(
            percent in 0u32..=100,
            replicas in 0u32..=10_000,
        ) {
            let up = Amount::Percent(percent).resolve(replicas, true);
            let down = Amount::Percent(percent).resolve(replicas, false);
            prop_assert!(down <= up && up <= replicas);
            prop_assert!(up - down <= 1);
        }
    }
}
