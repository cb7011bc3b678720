//! `nodewright-sandbox`: the local stand-in for Azure (ARM emulator, node joiner, disk attacher).
//!
//! For now it serves only `/healthz`; the ARM emulator is built in the sandbox issue.

use clap::Parser;

/// The local stand-in for Azure Resource Manager.
#[derive(Debug, Parser)]
#[command(name = "nodewright-sandbox", version)]
struct Args {
    /// Address to listen on.
    #[arg(
        long,
        env = "NODEWRIGHT_SANDBOX_LISTEN",
        default_value = "127.0.0.1:8443"
    )]
    listen: std::net::SocketAddr,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().init();
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    tracing::info!(listen = %args.listen, "nodewright-sandbox listening");
    axum::serve(listener, app()).await?;
    Ok(())
}

/// The sandbox's HTTP routes.
fn app() -> axum::Router {
    axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }))
}
