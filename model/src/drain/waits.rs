//! The drain's long waits, in looks: a wait for evicted pods to go, for volumes to detach here
//! or attach elsewhere is made of looks of at most [`WAIT_LOOK`]; between two looks the drain
//! asks whether it must stop waiting — force mode is due (a request, the Node NotReady past its
//! threshold, the deadline) — so a pod with an hour of grace period never keeps a force request
//! waiting for an hour. And when a drain's history is long enough to continue as a new run.

use std::time::Duration;

use super::force::ForceReason;
use super::lanes::MIN_WAIT;

/// The longest look of a wait: a force request, a Node going NotReady or a cancellation is
/// noticed within about this long in every wait of the drain.
pub const WAIT_LOOK: Duration = Duration::from_secs(10);

/// The smallest `historyLimit` a drain accepts: below it a run would continue as new before
/// its first wait ends.
pub const MIN_DRAIN_HISTORY_LIMIT: u32 = 100;

/// What a wait waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitKind {
    /// Evicted or terminating pods to go (bounded by the drain's deadline).
    PodsGone,
    /// A moved pod's volumes to detach from this node (bounded by the deadline).
    Detach,
    /// A moved pod's volumes to attach on another node: the pod has left already, so the
    /// deadline does not end this wait; a request or an unhealthy Node does.
    Reattach,
}

/// What the drain does after one look of a wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterLook {
    /// The wait is over: nothing is pending any more, or its time is up (what is pending then
    /// is reported by the caller as before).
    Over,
    /// Look again, for at most this long.
    LookAgain(Duration),
    /// Stop waiting: force mode is due for this reason.
    Forced(ForceReason),
}

/// How long the next look of a wait lasts when `left` is left of its budget: at most
/// [`WAIT_LOOK`], never shorter than [`MIN_WAIT`].
pub fn look_length(left: Duration) -> Duration {
    left.min(WAIT_LOOK).max(MIN_WAIT)
}

/// After a look of a `kind` wait that left `pending` things waited for, with `left` of its
/// budget, when force mode is due for `force` (the drain's force rule now, `None` when not due
/// or when the wait runs on the cancellation path): nothing pending ends the wait; force mode
/// due ends it early (but for a reattach, which only a request or an unhealthy Node ends); no
/// time left ends it; otherwise another look.
pub fn after_look(
    kind: WaitKind,
    pending: usize,
    force: Option<&ForceReason>,
    left: Duration,
) -> AfterLook {
    if pending == 0 {
        return AfterLook::Over;
    }
    if let Some(reason) = force.filter(|reason| ends_wait(kind, reason)) {
        return AfterLook::Forced(reason.clone());
    }
    if left.is_zero() {
        AfterLook::Over
    } else {
        AfterLook::LookAgain(look_length(left))
    }
}

/// Whether force mode due for `reason` ends a `kind` wait.
fn ends_wait(kind: WaitKind, reason: &ForceReason) -> bool {
    match kind {
        WaitKind::PodsGone | WaitKind::Detach => true,
        WaitKind::Reattach => !matches!(
            reason,
            ForceReason::DeadlinePassed | ForceReason::HardDeadlinePassed { .. }
        ),
    }
}

/// Whether a drain whose history has `length` events continues as a new run at its next
/// chance: at `limit` (the request's `historyLimit`, when it has one) or when Temporal suggests
/// it.
pub fn history_is_long(length: u32, limit: Option<u32>, suggested: bool) -> bool {
    suggested || limit.is_some_and(|limit| length >= limit)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn s(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn a_look_ends_the_wait_when_force_mode_is_due_and_the_wait_is_one_it_ends() {
        use AfterLook::*;
        use WaitKind::*;
        let requested = ForceReason::Requested;
        let not_ready = ForceReason::NotReady { for_seconds: 301 };
        let deadline = ForceReason::DeadlinePassed;
        let hard = ForceReason::HardDeadlinePassed {
            after_seconds: 3600,
        };
        let table: Vec<(WaitKind, usize, Option<&ForceReason>, Duration, AfterLook)> = vec![
            // Nothing pending: over, whatever else holds.
            (PodsGone, 0, None, s(3000), Over),
            (PodsGone, 0, Some(&requested), s(3000), Over),
            (Detach, 0, Some(&deadline), Duration::ZERO, Over),
            // A pod with an hour of grace: a request, NotReady, the deadline end the wait.
            (PodsGone, 1, None, s(3590), LookAgain(WAIT_LOOK)),
            (
                PodsGone,
                1,
                Some(&requested),
                s(3590),
                Forced(requested.clone()),
            ),
            (
                PodsGone,
                2,
                Some(&not_ready),
                s(3590),
                Forced(not_ready.clone()),
            ),
            (
                PodsGone,
                1,
                Some(&deadline),
                Duration::ZERO,
                Forced(deadline.clone()),
            ),
            (PodsGone, 1, Some(&hard), s(5), Forced(hard.clone())),
            // The budget runs out: over (the caller reports what is left).
            (PodsGone, 1, None, Duration::ZERO, Over),
            (PodsGone, 1, None, s(4), LookAgain(s(4))),
            (
                PodsGone,
                1,
                None,
                Duration::from_millis(300),
                LookAgain(MIN_WAIT),
            ),
            // A stuck detach: the same.
            (Detach, 1, None, s(100), LookAgain(WAIT_LOOK)),
            (
                Detach,
                1,
                Some(&requested),
                s(100),
                Forced(requested.clone()),
            ),
            (
                Detach,
                3,
                Some(&not_ready),
                s(100),
                Forced(not_ready.clone()),
            ),
            (Detach, 1, None, Duration::ZERO, Over),
            // A reattach elsewhere outlives the deadline; a request or NotReady ends it.
            (Reattach, 1, Some(&deadline), s(60), LookAgain(WAIT_LOOK)),
            (Reattach, 1, Some(&hard), s(60), LookAgain(WAIT_LOOK)),
            (Reattach, 1, Some(&deadline), Duration::ZERO, Over),
            (
                Reattach,
                1,
                Some(&requested),
                s(60),
                Forced(requested.clone()),
            ),
            (
                Reattach,
                1,
                Some(&not_ready),
                s(60),
                Forced(not_ready.clone()),
            ),
            (Reattach, 0, Some(&requested), s(60), Over),
        ];
        for (kind, pending, force, left, expected) in table {
            assert_eq!(
                after_look(kind, pending, force, left),
                expected,
                "{kind:?} pending {pending} force {force:?} left {left:?}"
            );
        }
    }

    #[test]
    fn a_drain_continues_as_new_at_its_limit_or_when_temporal_suggests_it() {
        let table = [
            (50, None, false, false),
            (50, None, true, true),
            (99, Some(100), false, false),
            (100, Some(100), false, true),
            (4000, Some(100), false, true),
            (10, Some(100), true, true),
        ];
        for (length, limit, suggested, expected) in table {
            assert_eq!(
                history_is_long(length, limit, suggested),
                expected,
                "{length} {limit:?} {suggested}"
            );
        }
    }

    proptest! {
        #[test]
        fn a_look_never_outlasts_the_budget_or_wait_look(left in 0u64..100_000) {
            let left = Duration::from_millis(left);
            let look = look_length(left);
            prop_assert!(look <= WAIT_LOOK);
            prop_assert!(look >= MIN_WAIT);
            prop_assert!(look <= left.max(MIN_WAIT));
            match after_look(WaitKind::PodsGone, 1, None, left) {
                AfterLook::LookAgain(next) => prop_assert!(!left.is_zero() && next == look),
                AfterLook::Over => prop_assert!(left.is_zero()),
                AfterLook::Forced(_) => prop_assert!(false, "no force reason was given"),
            }
        }
    }
}
