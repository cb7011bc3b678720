//! The pace of eviction rounds while PodDisruptionBudgets refuse pods: the pauses grow while
//! nothing moves and come back to the PDB retry interval when a budget moves
//! (`model::drain::RoundPause`), and the looks at the Node between rounds read the worker's
//! mirrors. A drain whose pods were refused before this pace existed (no
//! [`PATCH_ROUNDS_BACK_OFF`] marker) keeps pausing one interval and reading the apiserver.

use std::time::Duration;

use nodewright_activities::kube::Eviction;
use nodewright_model::drain::{PdbFacts, RoundPause};

use super::state::Ctx;

/// The patch that brought growing pauses and mirrored looks: asked only when a round must
/// wait on refused pods, so a drain no budget refuses records no marker.
const PATCH_ROUNDS_BACK_OFF: &str = "drain-rounds-back-off";

/// The pace of one drain's rounds.
pub(super) struct Rounds {
    interval: Duration,
    pause: RoundPause,
    /// Whether the run paces its rounds so, once asked.
    paced: Option<bool>,
}

impl Rounds {
    /// The rounds of a drain whose PDB retry interval is `interval`.
    pub(super) fn new(interval: Duration) -> Self {
        Self {
            interval,
            pause: RoundPause::new(interval),
            paced: None,
        }
    }

    /// The pause after a round whose refusals named `budgets`.
    pub(super) fn pause_after(&mut self, ctx: &mut Ctx, budgets: &[PdbFacts]) -> Duration {
        if self.paced(ctx) {
            self.pause.next(budgets)
        } else {
            self.interval
        }
    }

    /// Whether the looks between rounds may read the worker's mirrors.
    pub(super) fn look_in_mirrors(&mut self, ctx: &mut Ctx) -> bool {
        self.paced(ctx)
    }

    fn paced(&mut self, ctx: &mut Ctx) -> bool {
        *self
            .paced
            .get_or_insert_with(|| ctx.patched(PATCH_ROUNDS_BACK_OFF))
    }
}

/// The budget a refusal named, when it is a budget's refusal that named one.
pub(super) fn refusing_budget(outcome: &Eviction) -> Option<&PdbFacts> {
    match outcome {
        Eviction::Blocked { pdb, .. } => pdb.as_ref(),
        _ => None,
    }
}
