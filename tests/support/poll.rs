//! Waiting for the world to reach a state, with a deadline and a message saying what was awaited.

use std::future::Future;
use std::time::Duration;

use anyhow::{Result, bail};

/// Calls `check` every `interval` until it returns `Ok(Some(value))`, and fails once `timeout`
/// has passed. `Ok(None)` means "not yet"; `Err` ends the wait at once. The failure message names
/// `what` and the last state `check` described through `last_seen`.
pub async fn eventually<T, F, Fut>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut check: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(interval).await;
    }
}
