//! Logs of a failure that repeats every poll, rate-limited: the first failure, a changed one,
//! and then one line a minute saying how many were left out; and one line when it ends.

use std::time::{Duration, Instant};

/// How often a repeating failure is logged.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// The log state of one kind of failure (IMDS, Kubernetes).
#[derive(Debug, Default)]
pub struct Throttled {
    last_logged: Option<Instant>,
    last_message: String,
    left_out: u64,
    failing: bool,
}

impl Throttled {
    /// A failure with `message` at `now`: `Some(left out since the last line)` when it is to be
    /// logged, `None` when it is left out.
    pub fn failure(&mut self, message: &str, now: Instant) -> Option<u64> {
        self.failing = true;
        let due = match self.last_logged {
            None => true,
            Some(at) => {
                message != self.last_message || now.saturating_duration_since(at) >= LOG_EVERY
            }
        };
        if !due {
            self.left_out += 1;
            return None;
        }
        let left_out = self.left_out;
        self.last_logged = Some(now);
        self.last_message = message.to_owned();
        self.left_out = 0;
        Some(left_out)
    }

    /// A success: `true` when it ends a run of failures (say so once).
    pub fn success(&mut self) -> bool {
        let ended = self.failing;
        *self = Self::default();
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeating_failure_is_logged_once_a_minute_and_its_end_once() {
        let start = Instant::now();
        let mut log = Throttled::default();
        assert!(!log.success(), "no failure to end");
        assert_eq!(log.failure("down", start), Some(0));
        assert_eq!(log.failure("down", start + Duration::from_secs(1)), None);
        assert_eq!(log.failure("down", start + Duration::from_secs(2)), None);
        assert_eq!(
            log.failure("other", start + Duration::from_secs(3)),
            Some(2)
        );
        assert_eq!(log.failure("other", start + Duration::from_secs(4)), None);
        assert_eq!(
            log.failure("other", start + Duration::from_secs(63)),
            Some(1)
        );
        assert!(log.success());
        assert!(!log.success());
        assert_eq!(
            log.failure("down", start + Duration::from_secs(64)),
            Some(0)
        );
    }
}
