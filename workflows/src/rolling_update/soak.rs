//! The soak between batches (`spec.strategy.soak`, `model::rollout::soak`): once a batch of new
//! machines is available the plan waits this long with them healthy, the status showing the
//! batch and until when; a machine of the batch that turns NotReady, fails or goes pauses the
//! rollout, so that a bad image stops at its first batch (the canary).

use nodewright_model::rollout::soak::hold;
use nodewright_model::rollout::{
    ObservedMachine, PhaseEvent, Plan, RolloutRequest, SoakInput, next_phase, soak_step,
};
use temporalio_sdk::WorkflowContext;

use super::state::HasRollout;
use super::status::note;

/// `decided`, held while a batch soaks; the soak's state is kept in the status. `at` is now,
/// Unix seconds.
pub fn soak_plan<W: HasRollout>(
    ctx: &mut WorkflowContext<W>,
    request: &RolloutRequest,
    machines: &[ObservedMachine],
    decided: Plan,
    at: i64,
) -> Plan {
    let strategy = ctx.state(|s| s.rollout().strategy_in_force());
    if strategy.soak.is_zero() {
        return decided;
    }
    let (current, soaked_through) = ctx.state(|s| {
        s.rollout()
            .status
            .as_ref()
            .map(|status| (status.soak.clone(), status.soaked_through))
            .unwrap_or_default()
    });
    let soak_secs = i64::try_from(strategy.soak.as_secs()).unwrap_or(i64::MAX);
    let step = soak_step(&SoakInput {
        machines,
        template_hash: &request.pool.template_hash,
        now: at,
        min_ready_secs: strategy.min_ready_secs(),
        soak_secs,
        current: current.as_ref(),
        soaked_through,
    });
    let pool = &request.pool.name;
    let soak_text = nodewright_model::text::duration(strategy.soak);
    ctx.state_mut(|s| {
        s.rollout_mut().with_status(|status| {
            status.soak.clone_from(&step.soak);
            status.soaked_through = step.soaked_through;
            if let Some(machine) = &step.unhealthy
                && let Some(paused) = next_phase(status.phase, PhaseEvent::Pause)
            {
                status.phase = paused;
                status.paused_because = Some(format!(
                    "machine {machine} of the new template is not healthy any more during its soak (strategy.soak {soak_text}): the rollout paused itself. Look at the machine, then `nodewright pool rollout resume {pool}`, or roll back with `nodewright pool rollback {pool}`"
                ));
            }
        });
    });
    if let Some(machine) = &step.unhealthy {
        note(
            ctx,
            format!("machine {machine} turned unhealthy during its soak: paused"),
        );
    } else if let Some(started) = step.soak.as_ref().filter(|_| current.is_none()) {
        note(
            ctx,
            format!(
                "soaking {} for {soak_text} before going on",
                started.machines.join(", ")
            ),
        );
    }
    if step.hold {
        hold(decided, step.soak.map(|soak| soak.until))
    } else {
        decided
    }
}
