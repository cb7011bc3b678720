//! The controller and its RollingUpdate child: when a rollout starts, what the controller tells
//! the one in flight when the pool changes under it (the way a Kubernetes Deployment handles a
//! new template or new replicas mid-rollout), and when a rollout that ended without completing
//! is left alone.
//!
//! - **Start** ([`should_start`]): when a machine runs another template ([`super::Decision`]'s
//!   `start_rollout`), or when `pool rollout` / `pool rollback` asked for one ([`RolloutOrder`]),
//!   except that a rollout to a template that was aborted (or failed, or was cancelled) is not
//!   started again on the controller's own account: it waits for a new template (`pool apply`) or
//!   an explicit `pool rollout`. Without that rule `pool rollout abort` would be undone at the
//!   next look.
//! - **Steer** ([`steer`]): the pool is being deleted → the rollout is aborted (it creates
//!   nothing more; the controller ends once it has ended and every machine is gone); the
//!   pool's template changed while a rollout runs → the rollout is
//!   aborted (its children in flight finish) and the next one starts to the newest template when
//!   it has ended (a Deployment's rollover: the half-rolled template becomes an old one); the
//!   pool's replicas changed → the rollout is told the new number and plans with it from its next
//!   look (budget resolved for it; surplus machines go old-template first; machines added are of
//!   the new template, where a Deployment would spread them over its old and new ReplicaSets:
//!   a machine made from the old template would only be replaced).

use serde::{Deserialize, Serialize};

use crate::pool::ValidPool;
use crate::rollout::PoolHistory;

/// `pool rollout` or `pool rollback` of a pool whose controller runs: the pool to roll to (it
/// becomes the controller's spec) and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutOrder {
    /// The pool to roll to (its name must be the controller's).
    pub pool: ValidPool,
    /// Replace this many machines, then wait for `pool rollout approve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<u32>,
    /// The pool's templates before this rollout (as the CLI read them).
    #[serde(default)]
    pub history: PoolHistory,
    /// It is a rollback.
    #[serde(default)]
    pub rollback: bool,
}

/// How the next rollout the controller starts is run: what an order asked, or the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutOptions {
    /// The canary size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<u32>,
    /// It is a rollback.
    #[serde(default)]
    pub rollback: bool,
}

/// The rollout in flight, as the controller started it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    /// The template it rolls to.
    pub template_hash: String,
    /// The replicas it was last given.
    pub replicas: u32,
    /// It was told to abort.
    pub aborting: bool,
}

/// What to tell the rollout in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steer {
    /// Nothing changed.
    Nothing,
    /// The template changed: abort it (the next rollout starts when it has ended).
    Abort,
    /// The replicas changed: plan with this many.
    Scale(u32),
}

/// What to tell the rollout in flight now that the pool is `pool` (and being deleted when
/// `deleting`: the rollout is aborted so that it creates nothing more).
pub fn steer(in_flight: &InFlight, pool: &ValidPool, deleting: bool) -> Steer {
    if in_flight.aborting {
        Steer::Nothing
    } else if deleting || in_flight.template_hash != pool.template_hash {
        Steer::Abort
    } else if in_flight.replicas != pool.replicas {
        Steer::Scale(pool.replicas)
    } else {
        Steer::Nothing
    }
}

/// Whether the controller starts a rollout now: none is in flight, and either an order waits or
/// a machine runs another template that is not one whose rollout ended without completing
/// (`held_template`).
pub fn should_start(
    machines_differ: bool,
    order_waiting: bool,
    template_hash: &str,
    held_template: Option<&str>,
) -> bool {
    order_waiting || (machines_differ && held_template != Some(template_hash))
}

/// How a rollout child ended, for the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RolloutEnd {
    /// Every machine runs its template; the pool's templates after it.
    Completed(PoolHistory),
    /// Aborted or cancelled (the pool may mix templates); the pool's templates after it.
    Stopped(PoolHistory),
    /// It failed, with the reason.
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::from_yaml;

    fn pool(hash: &str, replicas: u32) -> ValidPool {
        let mut pool = from_yaml(include_str!("../../../examples/pools/workers.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        pool.template_hash = hash.to_owned();
        pool.replicas = replicas;
        pool
    }

    fn in_flight(hash: &str, replicas: u32, aborting: bool) -> InFlight {
        InFlight {
            template_hash: hash.to_owned(),
            replicas,
            aborting,
        }
    }

    #[test]
    fn a_rollout_in_flight_is_aborted_on_a_new_template_and_scaled_on_new_replicas() {
        let table = [
            (in_flight("a", 3, false), pool("a", 3), Steer::Nothing),
            (in_flight("a", 3, false), pool("a", 5), Steer::Scale(5)),
            (in_flight("a", 3, false), pool("a", 0), Steer::Scale(0)),
            (in_flight("a", 3, false), pool("b", 3), Steer::Abort),
            // A new template wins over new replicas: the next rollout starts with both.
            (in_flight("a", 3, false), pool("b", 5), Steer::Abort),
            // Told once: nothing more while it winds down.
            (in_flight("a", 3, true), pool("b", 5), Steer::Nothing),
            (in_flight("a", 3, true), pool("a", 5), Steer::Nothing),
        ];
        for (flight, pool, expected) in table {
            assert_eq!(
                steer(&flight, &pool, false),
                expected,
                "{flight:?} {}",
                pool.replicas
            );
        }
        // A pool being deleted aborts its rollout, once.
        assert_eq!(
            steer(&in_flight("a", 3, false), &pool("a", 3), true),
            Steer::Abort
        );
        assert_eq!(
            steer(&in_flight("a", 3, true), &pool("a", 3), true),
            Steer::Nothing
        );
    }

    #[test]
    fn a_rollout_that_ended_without_completing_is_not_started_again_on_its_own() {
        let table = [
            // (machines differ, order, template, held, start)
            (true, false, "b", None, true),
            (false, false, "b", None, false),
            (true, false, "b", Some("b"), false),
            // A newer template than the held one rolls.
            (true, false, "c", Some("b"), true),
            // An order always starts one (a drain-only rollout too: no machine differs).
            (true, true, "b", Some("b"), true),
            (false, true, "b", None, true),
        ];
        for (differ, order, template, held, expected) in table {
            assert_eq!(
                should_start(differ, order, template, held),
                expected,
                "{differ} {order} {template} {held:?}"
            );
        }
    }
}
