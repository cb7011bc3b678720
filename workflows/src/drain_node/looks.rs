//! The drain's long waits in looks: a wait for evicted pods to go, for volumes to detach here or
//! attach elsewhere is made of looks of at most `model::drain::WAIT_LOOK`; between two looks the
//! drain stops at a cancellation request (`cancellation::guard`), looks at the Node's health,
//! and asks `model::drain::after_look` whether force mode (a request, the Node NotReady past its
//! threshold, the deadline) ends the wait. A run that began before this waited in one piece
//! ([`PATCH_WAIT_LOOKS`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use nodewright_model::drain::{AfterLook, ForceReason, WaitKind, after_look, look_length};
use nodewright_model::machine::Step;

use super::state::{Ctx, Drain, force_due, list_pods};
use crate::cancellation;
use crate::progress::{StepFailed, later, left_until, now};

/// The patch that waits in looks (a force request, NotReady and a cancellation noticed within
/// seconds in every wait): asked at the start of each long wait.
const PATCH_WAIT_LOOKS: &str = "drain-waits-in-looks";

/// The looks of one wait until `until`.
pub(super) struct Looks {
    kind: WaitKind,
    until: DateTime<Utc>,
    /// The whole wait's length (its one look in a run that began before looks).
    budget: Duration,
    /// False in a run that began before waits were made of looks: one look, to `until`.
    in_looks: bool,
    /// Set when force mode ended the wait early.
    pub(super) forced: Option<ForceReason>,
}

impl Looks {
    /// The looks of a `kind` wait of `budget` that ends at `until` at the latest.
    pub(super) fn new(
        ctx: &mut Ctx,
        kind: WaitKind,
        (until, budget): (DateTime<Utc>, Duration),
    ) -> Self {
        Self {
            kind,
            until,
            budget,
            in_looks: ctx.patched(PATCH_WAIT_LOOKS),
            forced: None,
        }
    }

    /// When the next look ends, and how long it lasts.
    pub(super) fn next(&self, ctx: &Ctx) -> (DateTime<Utc>, Duration) {
        if !self.in_looks {
            return (self.until, self.budget);
        }
        let look = look_length(left_until(ctx, self.until));
        (later(now(ctx), look), look)
    }

    /// After a look that left `pending` things waited for: whether to look again. Between two
    /// looks a cancellation request stops the drain (but on the cancellation path), the Node's
    /// health is read again, and force mode due ends the wait (recorded in `forced`).
    pub(super) async fn again(
        &mut self,
        ctx: &mut Ctx,
        state: &mut Drain,
        pending: usize,
        step: Step,
    ) -> Result<bool, StepFailed> {
        if !self.in_looks || pending == 0 {
            return Ok(false);
        }
        let force = if state.shielded {
            // Giving the Node back: only the wait's own end counts.
            None
        } else {
            cancellation::guard(ctx, step)?;
            let listed = list_pods(ctx, state, step).await?;
            state.health = listed.health;
            force_due(ctx, state)
        };
        let left = left_until(ctx, self.until);
        Ok(match after_look(self.kind, pending, force.as_ref(), left) {
            AfterLook::Over => false,
            AfterLook::LookAgain(_) => true,
            AfterLook::Forced(reason) => {
                self.forced = Some(reason);
                false
            }
        })
    }
}
