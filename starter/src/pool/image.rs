//! `pool image NAME` shows the image versions a pool's controller follows (current, newest,
//! previous, policy, pin, next check); `pool image pin|unpin|update NAME` steer them through
//! the controller's `image` update (refused with its reason, exit 2).

use clap::{Args, Subcommand};
use nodewright_model::controller::ImageOrder;
use nodewright_model::image::ImageStatus;
use nodewright_workflows::PoolControllerWorkflow;
use temporalio_client::WorkflowExecuteUpdateOptions;

use super::controller::{controller_id, run_update, running_controller, running_status};
use super::flags;
use crate::{CliError, Output, settings::Settings};

/// `pool image`: show the versions, or steer them with a subcommand.
#[derive(Debug, Args)]
pub struct ImageArgs {
    #[command(subcommand)]
    command: Option<ImageCommand>,
    /// The pool's name.
    #[arg(required = true)]
    pool: Option<String>,
}

/// Steering a pool's image versions.
#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Hold the image at its current version: `spec.imageUpdate` moves it no more.
    Pin {
        /// The pool's name.
        pool: String,
    },
    /// Let `spec.imageUpdate` move the image again.
    Unpin {
        /// The pool's name.
        pool: String,
    },
    /// Roll to the newest eligible version the last check found, now (the maintenance windows
    /// gate it like any rollout an operator starts).
    Update {
        /// The pool's name.
        pool: String,
    },
}

/// Runs `pool image`.
pub async fn run(settings: &Settings, output: Output, args: ImageArgs) -> Result<(), CliError> {
    match (args.command, args.pool) {
        (Some(ImageCommand::Pin { pool }), _) => {
            order(settings, output, &pool, ImageOrder::Pin).await
        }
        (Some(ImageCommand::Unpin { pool }), _) => {
            order(settings, output, &pool, ImageOrder::Unpin).await
        }
        (Some(ImageCommand::Update { pool }), _) => {
            order(settings, output, &pool, ImageOrder::Update).await
        }
        (None, Some(pool)) => show(settings, output, &pool).await,
        (None, None) => Err(CliError::InvalidInput(
            "give the pool's name: `nodewright pool image NAME`".to_owned(),
        )),
    }
}

/// `pool image NAME`.
async fn show(settings: &Settings, output: Output, pool: &str) -> Result<(), CliError> {
    let pool = flags::pool_name(pool)?;
    let client = settings.temporal().connect().await?;
    let workflow_id = controller_id(&settings.cluster()?, pool);
    let document = match running_status(&client, &workflow_id).await? {
        Some(Ok(document)) => document,
        Some(Err(reason)) => {
            return Err(CliError::RunFailed(format!(
                "{workflow_id} did not answer: {reason}"
            )));
        }
        None => {
            return Err(CliError::RunFailed(format!(
                "no controller of pool {pool} is running; start one with `nodewright pool apply -f FILE`"
            )));
        }
    };
    let image = document.status.image;
    match output {
        Output::Json => println!("{}", serde_json::json!({ "pool": pool, "image": image })),
        Output::Text => match &image {
            Some(image) => print_image(pool, image),
            None => println!(
                "pool {pool} follows no image versions: its image names a concrete version, is a managed image, or is not resolved yet"
            ),
        },
    }
    Ok(())
}

fn print_image(pool: &str, image: &ImageStatus) {
    let when = |at: i64| {
        chrono::DateTime::from_timestamp(at, 0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_else(|| at.to_string())
    };
    println!("pool {pool}: {}", image.image);
    println!("  current    {}", image.current);
    println!(
        "  newest     {}",
        image.newest.as_deref().unwrap_or("(none found)")
    );
    let previous = if image.previous.is_empty() {
        "(none)".to_owned()
    } else {
        image.previous.join(", ")
    };
    println!("  previous   {previous}");
    let pinned = if image.pinned { ", pinned" } else { "" };
    println!("  policy     {}{pinned}", image.policy);
    println!(
        "  checked    {} (next {})",
        when(image.checked_at),
        when(image.next_check_at)
    );
    println!("  {}", image.message);
}

/// `pool image pin|unpin|update NAME`.
async fn order(
    settings: &Settings,
    output: Output,
    pool: &str,
    order: ImageOrder,
) -> Result<(), CliError> {
    let pool = flags::pool_name(pool)?.to_owned();
    let (client, workflow_id, link) = running_controller(settings, &pool).await?;
    let version = run_update(&client, &workflow_id, &pool, |h| async move {
        h.execute_update(
            PoolControllerWorkflow::image,
            order,
            WorkflowExecuteUpdateOptions::default(),
        )
        .await
    })
    .await?;
    let said = match order {
        ImageOrder::Pin => format!("pool {pool}: image pinned at version {version}"),
        ImageOrder::Unpin => format!(
            "pool {pool}: image unpinned at version {version}; spec.imageUpdate moves it again"
        ),
        ImageOrder::Update => format!(
            "pool {pool}: rolling to image version {version}; follow it with `nodewright pool rollout status {pool}`"
        ),
    };
    match output {
        Output::Json => println!(
            "{}",
            serde_json::json!({ "pool": pool, "order": order, "version": version, "ui": link })
        ),
        Output::Text => {
            println!("{said}");
            println!("  temporal UI  {link}");
        }
    }
    Ok(())
}
