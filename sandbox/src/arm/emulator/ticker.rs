//! The background tasks that keep time for the emulator: one applies due transitions (an
//! operation's latency, a guest's boot) when they are due, so
//! [`crate::compute::Compute::changes`] fires on time; one writes a large state file behind the
//! changes.

use std::sync::Arc;
use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::{Emulator, Inner};

/// The longest the background task sleeps between checks.
const MAX_TICK: Duration = Duration::from_secs(1);

impl Emulator {
    /// Starts the background task that applies transitions on time (once, inside a runtime).
    pub(crate) fn ensure_ticker(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.inner.ticker_started.swap(true, Ordering::SeqCst) {
            return;
        }
        runtime.spawn(tick(Arc::downgrade(&self.inner)));
        if self.inner.persister.is_some() {
            runtime.spawn(persist_behind(Arc::downgrade(&self.inner)));
        }
    }
}

/// Writes the state file behind the changes while it is large (see `persist.rs`).
async fn persist_behind(inner: Weak<Inner>) {
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let Some(persister) = &strong.persister else {
            return;
        };
        match persister.due(Instant::now()) {
            Some(wait) if wait.is_zero() => {
                let started = Instant::now();
                let (snapshot, generation) = {
                    let core = strong.lock();
                    (core.state.clone(), persister.snapshot_taken())
                };
                let cloned = started.elapsed();
                persister.write_behind(snapshot, generation).await;
                tracing::debug!(
                    ?cloned,
                    total = ?started.elapsed(),
                    "sandbox state written behind"
                );
            }
            Some(wait) => tokio::time::sleep(wait.min(MAX_TICK)).await,
            None => {
                tokio::select! {
                    () = tokio::time::sleep(MAX_TICK) => {}
                    () = persister.wake.notified() => {}
                }
            }
        }
    }
}

async fn tick(inner: Weak<Inner>) {
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let now = Utc::now();
        let next = {
            let mut core = strong.lock();
            if super::advance(&mut core, now) {
                strong.changed(&core);
            }
            super::next_deadline(&core)
        };
        let wait = next
            .map(|t| (t - now).to_std().unwrap_or(Duration::ZERO))
            .unwrap_or(MAX_TICK)
            .min(MAX_TICK);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = strong.wake.notified() => {}
        }
    }
}
