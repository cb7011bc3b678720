//! Checking what was typed before anything starts: pool names, budgets, the canary. Every
//! refusal is [`CliError::InvalidInput`] (exit 2) naming the flag and the fix.

use nodewright_model::pool::{Amount, MAX_POOL_NAME_LEN, RolloutStrategy};
use nodewright_model::rollout::StrategyChange;
use nodewright_model::text::quoted;
use nodewright_model::{ClusterName, limits};

use super::BudgetArgs;
use crate::CliError;

/// clap's parser of `--max-surge` and `--max-unavailable`: `2` or `25%`.
pub fn amount(text: &str) -> Result<Amount, String> {
    Amount::parse(text)
}

/// clap's parser of the hidden `--observe-interval`: a duration (`2s`, `1m`) of at most
/// [`limits::MAX_OBSERVE_INTERVAL`].
pub fn observe_interval(text: &str) -> Result<humantime::Duration, String> {
    let parsed: humantime::Duration = text.parse().map_err(|error| {
        format!(
            "{} is not a duration ({error}); write e.g. 2s or 15s",
            quoted(text)
        )
    })?;
    match limits::longer_than(*parsed, limits::MAX_OBSERVE_INTERVAL) {
        Some(problem) => Err(format!("{} {problem}; write e.g. 2s or 15s", quoted(text))),
        None => Ok(parsed),
    }
}

/// clap's parser of `pool status --interval`: a duration (`2s`, `1m`) from 1 s to
/// [`limits::MAX_OBSERVE_INTERVAL`].
pub fn watch_interval(text: &str) -> Result<humantime::Duration, String> {
    let parsed: humantime::Duration = text.parse().map_err(|error| {
        format!(
            "{} is not a duration ({error}); write e.g. 2s or 30s",
            quoted(text)
        )
    })?;
    if *parsed < std::time::Duration::from_secs(1) {
        return Err(format!(
            "{} is shorter than 1s; write e.g. 2s or 30s",
            quoted(text)
        ));
    }
    match limits::longer_than(*parsed, limits::MAX_OBSERVE_INTERVAL) {
        Some(problem) => Err(format!("{} {problem}; write e.g. 2s or 30s", quoted(text))),
        None => Ok(parsed),
    }
}

/// `POOL` as typed: a pool name (the rules of `metadata.name`).
pub fn pool_name(value: &str) -> Result<&str, CliError> {
    // Pool names follow the cluster name's rules (a DNS label of at most 40 characters).
    ClusterName::parse("POOL", value).map_err(|invalid| {
        CliError::InvalidInput(format!(
            "POOL {} is not a pool name: it {}; give the `metadata.name` of the pool's file: 1-{MAX_POOL_NAME_LEN} lowercase letters, digits and '-', starting with a letter",
            quoted(value),
            invalid.problem
        ))
    })?;
    Ok(value)
}

impl BudgetArgs {
    /// The flags as a `set_strategy` change.
    pub fn change(&self) -> StrategyChange {
        StrategyChange {
            max_surge: self.max_surge,
            max_unavailable: self.max_unavailable,
        }
    }

    /// Whether neither flag was given.
    pub fn is_empty(&self) -> bool {
        self.max_surge.is_none() && self.max_unavailable.is_none()
    }

    /// `strategy` with the flags applied; `source` says where `strategy` comes from (for the
    /// message), e.g. `the pool file's`.
    ///
    /// # Errors
    ///
    /// Both budgets would be zero: nothing could ever be replaced.
    pub fn apply(
        &self,
        strategy: &RolloutStrategy,
        source: &str,
    ) -> Result<RolloutStrategy, CliError> {
        if self.is_empty() {
            return Ok(strategy.clone());
        }
        self.change().apply(strategy).map_err(|problem| {
            let given = match (self.max_surge, self.max_unavailable) {
                (Some(surge), Some(unavailable)) => {
                    format!("--max-surge {surge} with --max-unavailable {unavailable}")
                }
                (Some(surge), None) => format!(
                    "--max-surge {surge} with {source} maxUnavailable {}",
                    strategy.max_unavailable
                ),
                (None, Some(unavailable)) => format!(
                    "--max-unavailable {unavailable} with {source} maxSurge {}",
                    strategy.max_surge
                ),
                (None, None) => String::new(),
            };
            CliError::InvalidInput(format!(
                "{given}: {problem}, e.g. --max-surge 1 (add a new machine before taking an old one down) or --max-unavailable 1 (take an old one down first); nothing was started"
            ))
        })
    }
}

/// Checks `--canary N` against the pool's replicas.
///
/// # Errors
///
/// `N` is 0 or more than `replicas`.
pub fn check_canary(canary: Option<u32>, replicas: u32) -> Result<Option<u32>, CliError> {
    match canary {
        Some(n) if n == 0 || n > replicas => Err(CliError::InvalidInput(format!(
            "--canary {n}: a canary is at least 1 machine and at most the pool's replicas ({replicas}); pass --canary 1 to replace one machine and wait for `pool rollout approve`, or leave --canary out; nothing was started"
        ))),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn strategy(surge: Amount, unavailable: Amount) -> RolloutStrategy {
        RolloutStrategy {
            max_surge: surge,
            max_unavailable: unavailable,
            max_failures: 3,
            progress_deadline: Duration::from_secs(600),
            min_ready: Duration::ZERO,
            soak: Duration::ZERO,
        }
    }

    #[test]
    fn the_observe_interval_is_a_duration_up_to_an_hour() {
        assert_eq!(
            observe_interval("2s").map(|d| *d),
            Ok(Duration::from_secs(2))
        );
        assert_eq!(
            observe_interval("1h").map(|d| *d),
            Ok(limits::MAX_OBSERVE_INTERVAL)
        );
        assert_eq!(
            observe_interval("61m").map(|d| *d),
            Err(r#""61m" is longer than the maximum 1h; write e.g. 2s or 15s"#.to_owned())
        );
        assert!(observe_interval("often").is_err_and(|e| e.contains("is not a duration")));
    }

    #[test]
    fn the_watch_interval_is_a_duration_from_a_second_to_an_hour() {
        assert_eq!(watch_interval("2s").map(|d| *d), Ok(Duration::from_secs(2)));
        assert_eq!(
            watch_interval("500ms"),
            Err(r#""500ms" is shorter than 1s; write e.g. 2s or 30s"#.to_owned())
        );
        assert!(watch_interval("61m").is_err_and(|e| e.contains("longer than the maximum 1h")));
        assert!(watch_interval("often").is_err_and(|e| e.contains("is not a duration")));
    }

    #[test]
    fn budgets_beyond_1000_machines_are_refused() {
        assert!(amount("1000").is_ok());
        assert_eq!(
            amount("1001"),
            Err(
                r#""1001" is more than 1000 machines; give at most 1000 or a percentage (e.g. 25%)"#
                    .to_owned()
            )
        );
    }

    fn budget(surge: Option<&str>, unavailable: Option<&str>) -> BudgetArgs {
        let parse = |t: &str| amount(t).unwrap_or_else(|e| panic!("{e}"));
        BudgetArgs {
            max_surge: surge.map(parse),
            max_unavailable: unavailable.map(parse),
        }
    }

    #[test]
    fn amounts_are_numbers_or_percentages() {
        assert_eq!(amount("2"), Ok(Amount::Count(2)));
        assert_eq!(amount("25%"), Ok(Amount::Percent(25)));
        assert!(amount("1.5").is_err());
        assert!(amount("120%").is_err());
    }

    #[test]
    fn flags_override_the_file_and_both_zero_is_refused_naming_the_flag() {
        let file = strategy(Amount::Count(1), Amount::Count(0));
        let none = budget(None, None);
        assert_eq!(
            none.apply(&file, "the pool file's").ok(),
            Some(file.clone())
        );
        let wider = budget(Some("50%"), None)
            .apply(&file, "the pool file's")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (wider.max_surge, wider.max_unavailable),
            (Amount::Percent(50), Amount::Count(0))
        );
        let error = budget(Some("0"), None)
            .apply(&file, "the pool file's")
            .expect_err("both zero");
        let message = error.to_string();
        assert!(matches!(error, CliError::InvalidInput(_)));
        assert!(
            message.starts_with("--max-surge 0 with the pool file's maxUnavailable 0: "),
            "{message}"
        );
        assert!(message.contains("both zero"), "{message}");
        assert!(message.contains("--max-unavailable 1"), "{message}");
        let both = budget(Some("0%"), Some("0"))
            .apply(&file, "x")
            .expect_err("zero");
        assert!(
            both.to_string()
                .starts_with("--max-surge 0% with --max-unavailable 0: "),
            "{both}"
        );
    }

    #[test]
    fn a_canary_is_between_one_and_replicas() {
        assert!(check_canary(None, 3).is_ok_and(|c| c.is_none()));
        assert!(check_canary(Some(1), 3).is_ok_and(|c| c == Some(1)));
        assert!(check_canary(Some(3), 3).is_ok());
        for bad in [0, 4] {
            let error = check_canary(Some(bad), 3).expect_err("refused");
            assert!(
                error.to_string().starts_with(&format!("--canary {bad}: ")),
                "{error}"
            );
        }
    }

    #[test]
    fn pool_names_are_dns_labels() {
        assert!(pool_name("web").is_ok());
        let error = pool_name("Web_1").expect_err("invalid");
        assert!(matches!(error, CliError::InvalidInput(_)));
        assert!(
            error
                .to_string()
                .starts_with("POOL \"Web_1\" is not a pool name"),
            "{error}"
        );
    }
}
