//! How an activity lives with its worker and its workflow: work that can outlast a few seconds
//! heartbeats, so that a killed worker's step is taken up by another within the heartbeat
//! timeout instead of its start-to-close timeout; a wait stops as soon as its workflow cancels
//! it (the cancellation reaches an activity through its heartbeats).

use std::future::Future;
use std::time::Duration;

use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// How often work in progress heartbeats: well inside the workflows' 15 s heartbeat timeout.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(3);

/// Runs `work`, heartbeating every [`HEARTBEAT_EVERY`] until it ends. A cancellation does not
/// stop it: a write runs to its end, so that what it made is known and can be undone (the
/// workflows start writes shielded from their own cancellation).
pub async fn heartbeating<T>(ctx: &ActivityContext, work: impl Future<Output = T>) -> T {
    let mut work = std::pin::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return out,
            () = tokio::time::sleep(HEARTBEAT_EVERY) => beat(ctx).await,
        }
    }
}

/// Runs the wait `work` until it ends or the activity is cancelled; a cancelled wait ends with
/// the cancellation, at once. `work` must heartbeat (every wait here does), or the
/// cancellation never reaches the worker.
pub async fn until_cancelled<T>(
    ctx: &ActivityContext,
    work: impl Future<Output = Result<T, ActivityError>>,
) -> Result<T, ActivityError> {
    tokio::select! {
        out = work => out,
        () = ctx.cancelled() => Err(ActivityError::cancelled()),
    }
}

/// Records one heartbeat; a failure to record one is logged, never the activity's failure (the
/// next one may pass, and a lost worker is noticed by the heartbeat timeout anyway).
pub async fn beat(ctx: &ActivityContext) {
    if let Err(error) = ctx.record_heartbeat(()).await {
        tracing::debug!(
            error = %nodewright_model::text::error_chain(&error),
            "recording a heartbeat failed"
        );
    }
}

/// Tells Temporal that a waiting activity is alive; the activity's [`ActivityContext`] in
/// production, anything else (a counter) in tests, which cannot build a context.
pub trait Heartbeat {
    /// Records one heartbeat. A failure to record is logged, never fatal: the wait goes on and
    /// Temporal's heartbeat timeout decides.
    fn beat(&self) -> impl Future<Output = ()> + Send;
}

impl Heartbeat for ActivityContext {
    async fn beat(&self) {
        beat(self).await;
    }
}
