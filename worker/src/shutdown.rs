//! Shutdown signals: SIGTERM (Kubernetes) and Ctrl-C.

use tokio::sync::watch;

/// Listens for SIGTERM and Ctrl-C from now on. The receiver turns `true` at the first one, and
/// `on_signal` runs then (it marks the worker not ready).
pub fn listen(on_signal: impl FnOnce(&'static str) + Send + 'static) -> watch::Receiver<bool> {
    let (sender, receiver) = watch::channel(false);
    tokio::spawn(async move {
        let signal = wait_for_signal().await;
        on_signal(signal);
        let _ = sender.send(true);
        // Keep the sender alive so receivers never see the channel closed.
        std::future::pending::<()>().await;
    });
    receiver
}

/// Resolves once `receiver` has seen a signal.
pub async fn requested(mut receiver: watch::Receiver<bool>) {
    // An error means the sender is gone, which `listen` never lets happen; stop waiting then.
    let _ = receiver.wait_for(|stop| *stop).await;
}

async fn wait_for_signal() -> &'static str {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = match signal(SignalKind::terminate()) {
            Ok(terminate) => terminate,
            Err(error) => {
                tracing::warn!(
                    error = %nodewright_model::text::error_chain(&error),
                    "cannot listen for SIGTERM; only Ctrl-C stops the worker"
                );
                let _ = ctrl_c.await;
                return "SIGINT";
            }
        };
        tokio::select! {
            _ = ctrl_c => "SIGINT",
            _ = terminate.recv() => "SIGTERM",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
        "Ctrl-C"
    }
}
