//! A TCP proxy to the stack's apiserver that a test stops and starts again: the Kubernetes API
//! goes away for one worker (its kubeconfig points at the proxy) while the other tests keep
//! theirs.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, Result};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use crate::Stack;
use crate::stack::repo_root;

/// A TCP proxy to the apiserver that can be stopped (connections cut, port closed) and
/// started again on the same port.
pub struct ApiProxy {
    port: u16,
    upstream: String,
    tasks: Arc<Mutex<Vec<AbortHandle>>>,
}

impl ApiProxy {
    /// Listens on a free local port and relays every connection to `upstream` (host:port).
    pub async fn start(upstream: &str) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let proxy = Self {
            port: listener.local_addr()?.port(),
            upstream: upstream.to_owned(),
            tasks: Arc::default(),
        };
        proxy.serve(listener);
        Ok(proxy)
    }

    fn serve(&self, listener: TcpListener) {
        let (upstream, tasks) = (self.upstream.clone(), Arc::clone(&self.tasks));
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let connection = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                tasks
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(connection.abort_handle());
            }
        });
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(accept.abort_handle());
    }

    /// Cuts every connection and closes the port.
    pub fn stop(&self) {
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            task.abort();
        }
    }

    /// Listens on the same port again.
    pub async fn resume(&self) -> Result<()> {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await?;
        self.serve(listener);
        Ok(())
    }
}

impl ApiProxy {
    /// A proxy to the stack's apiserver and an admin kubeconfig that goes through it.
    pub async fn for_stack(stack: &Stack) -> Result<(Self, PathBuf)> {
        let admin = std::fs::read_to_string(&stack.kubeconfig)?;
        let server = admin
            .lines()
            .find_map(|line| line.trim().strip_prefix("server: https://"))
            .context("no server in the admin kubeconfig")?
            .to_owned();
        let proxy = Self::start(&server).await?;
        let dir = repo_root().join("target").join("e2e-kubeconfigs");
        std::fs::create_dir_all(&dir)?;
        let kubeconfig = dir.join(format!("proxy-{}.kubeconfig", proxy.port));
        std::fs::write(
            &kubeconfig,
            admin.replace(
                &format!("https://{server}"),
                &format!("https://127.0.0.1:{}", proxy.port),
            ),
        )?;
        Ok((proxy, kubeconfig))
    }
}
