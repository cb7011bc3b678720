//! How long a drain waits between two eviction rounds while PodDisruptionBudgets refuse its
//! pods: the PDB retry interval at first and whenever a budget the pods wait on moves, twice
//! as long after each round in which none moved, up to [`MAX_ROUND_FACTOR`] times the interval
//! (and never more than [`LONGEST_ROUND`], unless the interval itself is longer).
//!
//! kubectl drain asks again at a fixed interval; a drain of nodewright may wait on a budget for
//! hours, and 200 drains on one budget asking every 20 s are 10 evictions a second for the
//! apiserver. A budget that moves (a pod became healthy or stopped being so, pods were added)
//! is the sign that an eviction may pass soon, so the pace comes back at once.

use std::collections::BTreeMap;
use std::time::Duration;

use super::pdb::PdbFacts;

/// The longest round is this many PDB retry intervals.
pub const MAX_ROUND_FACTOR: u32 = 4;
/// No round grows past this, unless the PDB retry interval itself is longer.
pub const LONGEST_ROUND: Duration = Duration::from_secs(300);

/// What of a budget tells whether it moved between two rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BudgetState {
    expected_pods: i32,
    current_healthy: i32,
    desired_healthy: i32,
    disruptions_allowed: i32,
    observed_generation: Option<i64>,
}

impl From<&PdbFacts> for BudgetState {
    fn from(facts: &PdbFacts) -> Self {
        Self {
            expected_pods: facts.expected_pods,
            current_healthy: facts.current_healthy,
            desired_healthy: facts.desired_healthy,
            disruptions_allowed: facts.disruptions_allowed,
            observed_generation: facts.observed_generation,
        }
    }
}

/// The pause before each next round of a drain whose pods are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundPause {
    interval: Duration,
    last: Option<Duration>,
    budgets: BTreeMap<String, BudgetState>,
}

impl RoundPause {
    /// The pauses of a drain whose PDB retry interval is `interval`.
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            last: None,
            budgets: BTreeMap::new(),
        }
    }

    /// The longest pause: [`MAX_ROUND_FACTOR`] intervals, at most [`LONGEST_ROUND`] unless the
    /// interval is longer.
    pub fn longest(&self) -> Duration {
        let grown = self.interval.saturating_mul(MAX_ROUND_FACTOR);
        grown.min(LONGEST_ROUND).max(self.interval)
    }

    /// The pause after a round whose refused pods wait on `budgets` (as the refusals reported
    /// them; a refusal that named none adds nothing): the interval after the first round or
    /// when one of them moved since it was last seen (or is new), else twice the last pause, at
    /// most [`Self::longest`].
    pub fn next<'a>(&mut self, budgets: impl IntoIterator<Item = &'a PdbFacts>) -> Duration {
        let mut moved = false;
        for facts in budgets {
            let state = BudgetState::from(facts);
            if self.budgets.insert(facts.key(), state) != Some(state) {
                moved = true;
            }
        }
        let pause = match self.last {
            Some(last) if !moved => last.saturating_mul(2).min(self.longest()),
            _ => self.interval,
        };
        self.last = Some(pause);
        pause
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn budget(name: &str, healthy: i32) -> PdbFacts {
        PdbFacts {
            namespace: "shop".into(),
            name: name.into(),
            generation: Some(1),
            observed_generation: Some(1),
            expected_pods: 3,
            current_healthy: healthy,
            desired_healthy: 3,
            disruptions_allowed: 0,
        }
    }

    #[test]
    fn rounds_double_while_nothing_moves_and_come_back_when_a_budget_moves() {
        let mut pause = RoundPause::new(Duration::from_secs(20));
        let web = budget("web", 3);
        let seconds = |d: Duration| d.as_secs();
        let table = [
            (vec![web.clone()], 20, "first round"),
            (vec![web.clone()], 40, "unchanged: doubles"),
            (vec![web.clone()], 80, "unchanged: doubles"),
            (vec![web.clone()], 80, "at the longest"),
            (
                vec![budget("web", 2)],
                20,
                "a pod became unhealthy: the interval",
            ),
            (vec![budget("web", 2)], 40, "unchanged again"),
            (vec![budget("web", 2), budget("db", 3)], 20, "a new budget"),
            (vec![], 40, "no budget named"),
        ];
        for (budgets, expected, case) in table {
            assert_eq!(seconds(pause.next(&budgets)), expected, "{case}");
        }
    }

    #[test]
    fn the_longest_round_is_bounded_unless_the_interval_is_longer() {
        let table = [(20, 80), (60, 240), (100, 300), (600, 600), (0, 0)];
        for (interval, longest) in table {
            let pause = RoundPause::new(Duration::from_secs(interval));
            assert_eq!(pause.longest().as_secs(), longest, "interval {interval}");
        }
    }

    proptest! {
        #[test]
        fn a_pause_is_never_shorter_than_the_interval_nor_longer_than_the_longest(
            interval in 0u64..10_000,
            healthy in proptest::collection::vec(0i32..4, 1..30),
        ) {
            let mut pause = RoundPause::new(Duration::from_secs(interval));
            for healthy in healthy {
                let next = pause.next(&[budget("web", healthy)]);
                prop_assert!(next >= Duration::from_secs(interval));
                prop_assert!(next <= pause.longest());
            }
        }
    }
}
