//! DeleteMachine's looks at delete hooks (`model::hooks`): before the drain and before the VM
//! delete, the run reads the Node's `pre-drain.delete.hook.nodewright.io/*` or
//! `pre-terminate.delete.hook.nodewright.io/*` annotations and waits, looking again after a
//! durable timer ([`nodewright_model::hooks::LOOK_INTERVAL`], slower after half an hour), while
//! any is present, up to the request's hook timeout. The hold shows in the status (`hold`: the
//! hooks, since and until), in `NodewrightPhase` (the step) and in the UI's details line.

use chrono::{DateTime, Utc};
use nodewright_activities::kube::{KubeActivities, MachineNode};
use nodewright_model::hooks::{Held, HoldStep, HookStage, decide_hold};
use nodewright_model::machine::{DeleteMachineRequest, HookHold, Step};
use nodewright_model::text::duration;

use super::state::Ctx;
use crate::progress::{HasStatus, StepFailed, begin, done, now, rfc3339};
use crate::{activity_options, cancellation};

/// Patch marker of the looks at delete hooks: runs started before them replay without.
pub(super) const HOOKS_PATCH: &str = "delete-hooks";

/// The status step of a stage's look.
pub(super) fn step_of(stage: HookStage) -> Step {
    match stage {
        HookStage::PreDrain => Step::PreDrainHooks,
        HookStage::PreTerminate => Step::PreTerminateHooks,
    }
}

/// Waits while hooks of `stage` hold the delete: returns once none is present (or
/// `--skip-hooks` went past them, recorded in the status); fails the step when the hold outlasts
/// the hook timeout (the message names the hooks and `--skip-hooks`) or a cancellation request
/// came (reason `canceled`).
pub(super) async fn hold(
    ctx: &mut Ctx,
    request: &DeleteMachineRequest,
    vm_id: &str,
    stage: HookStage,
) -> Result<(), StepFailed> {
    let step = step_of(stage);
    begin(ctx, step);
    let node = MachineNode {
        node: request.machine.clone(),
        vm_id: vm_id.to_owned(),
    };
    let mut held: Option<Held> = None;
    let mut waited = false;
    loop {
        stop_if_canceled(ctx, step)?;
        let look = ctx
            .execute_activity(
                KubeActivities::read_delete_hooks,
                node.clone(),
                activity_options::read(),
            )
            .await;
        // A look (or the timer before it) cut short by the request ends the hold here.
        stop_if_canceled(ctx, step)?;
        let hooks = look.map_err(|e| StepFailed::from_activity(step, &e))?;
        let found = hooks.of(stage).clone();
        let at = now(ctx).timestamp();
        let this_hold = *held.get_or_insert_with(|| Held::starting(at, request.hook_timeout()));
        match decide_hold(
            &request.machine,
            stage,
            &found,
            request.skip_hooks,
            this_hold,
            at,
        ) {
            HoldStep::Go => {
                set_hold(ctx, None);
                let detail = if waited {
                    format!(
                        "held {} until its hooks were removed",
                        duration(std::time::Duration::from_secs(
                            u64::try_from(at - this_hold.since).unwrap_or(0)
                        ))
                    )
                } else {
                    "no hooks".to_owned()
                };
                done(ctx, step, detail);
                return Ok(());
            }
            HoldStep::Skip(skipped) => {
                set_hold(ctx, None);
                ctx.state_mut(|s| {
                    s.status_mut()
                        .skipped_hooks
                        .extend(skipped.names.iter().cloned())
                });
                done(
                    ctx,
                    step,
                    format!(
                        "skipped (--skip-hooks): {} (left on the Node)",
                        skipped.describe()
                    ),
                );
                return Ok(());
            }
            HoldStep::Wait { hooks, next_look } => {
                waited = true;
                let hold = HookHold {
                    stage,
                    hooks: hooks.names.clone(),
                    total: hooks.total,
                    since: rfc3339(at_time(this_hold.since)),
                    until: rfc3339(at_time(this_hold.until)),
                };
                ctx.set_current_details(format!(
                    "held by {stage} hooks until {} (then the delete fails): {}; their owners remove them, or cancel and run `nodewright machine delete {} --skip-hooks`",
                    hold.until,
                    hooks.describe(),
                    request.machine
                ));
                set_hold(ctx, Some(hold));
                ctx.timer(next_look).await;
            }
            HoldStep::TimedOut { message } => {
                set_hold(ctx, None);
                return Err(StepFailed::new(step, message));
            }
        }
    }
}

/// Fails `step` with `canceled` (and shows no hold any more) once a request came.
fn stop_if_canceled(ctx: &mut Ctx, step: Step) -> Result<(), StepFailed> {
    let canceled = cancellation::guard(ctx, step);
    if canceled.is_err() {
        set_hold(ctx, None);
    }
    canceled
}

fn set_hold(ctx: &mut Ctx, hold: Option<HookHold>) {
    ctx.state_mut(|s| s.status_mut().hold = hold);
}

/// Unix seconds as a time (the epoch for one out of range, which the model never gives).
fn at_time(secs: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(secs, 0).unwrap_or_default()
}
