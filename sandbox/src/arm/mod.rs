//! The ARM emulator: VMs, managed disks, NICs, virtual networks and subnets under
//! `/subscriptions/{sub}/resourceGroups/{rg}/providers/...`, async operations, latency profiles,
//! fault injection, request statistics, a request log and an admin API, served by axum (see the shared
//! `arm-contract.md`); and beside it the Key Vault secrets data plane under `/keyvault/{vault}`
//! ([`key_vault`]).
//!
//! [`Emulator`] is the state (cheap to clone); [`app`] serves it. Time-based transitions (an
//! operation's latency, a guest's boot) are applied lazily on every request and by a background
//! task that wakes at the next deadline, so [`crate::compute::Compute::changes`] fires on time.
//!
//! The files, in layers; each uses only the ones above it (no import cycles, see
//! `tests/tidy/modules.rs`):
//!
//! - Data: `state/` (resources, operation records, Key Vault's secrets, persisted by
//!   `persist.rs`), `error.rs`, `faults.rs`, `latency.rs`, `stats.rs`, `requests.rs`,
//!   `paths.rs`, `config.rs`, `api_versions.rs` (the api-versions accepted per resource type),
//!   `cidr.rs` (IPv4 prefixes).
//! - Data for capacity (part of the data layer: `config.rs` holds `quota.rs`'s section):
//!   `sizes.rs` (the VM size catalog), `quota.rs` (quota limits, size restrictions, usage).
//! - Rules on the data: `data_disks.rs`, `force_detach.rs`, `image_reference.rs` (the image
//!   version a VM's `imageReference` names), `virtual_machines/body.rs`,
//!   `networks.rs` (subnets and their validation), `nic_addresses.rs` (NICs' private IPs),
//!   `completion.rs` (what an operation's completion, or a create's preemption by a DELETE,
//!   does).
//! - The engine: `engine.rs` ([`Core`](engine::Core): starting and advancing operations);
//!   `platform.rs` (what the platform does to a VM on its own: evict, redeploy, restart, delete)
//!   and `scheduled_events.rs` (Scheduled Events: scheduled, started, carried out, ended);
//!   `spot_prices.rs` (the Spot prices in force) is data.
//! - The handle: `emulator.rs` ([`Emulator`]; `emulator/ticker.rs` keeps time).
//! - HTTP: `http.rs` (request context, middleware, answers), `virtual_machines.rs`, `disks.rs`,
//!   `network_interfaces.rs`, `virtual_networks.rs`, `subnets.rs`, `images.rs` (marketplace
//!   images, `/sandbox/images`), `galleries/` (Azure Compute Galleries), `operations.rs`
//!   (polling), `admin.rs` (with `seed.rs`), `admin_events.rs` (Scheduled Events, the eviction
//!   notice, Spot prices), [`key_vault`], [`imds`] (the VMs' metadata services), and
//!   `compute_impl.rs` (the emulator as [`crate::compute::Compute`]); this file assembles the app.
//! - HTTP for capacity (beside the others): `skus.rs` (resource SKUs), `usages.rs` (compute
//!   usages), `virtual_machines/capacity.rs` (a create's or resize's size checks).

mod admin;
mod admin_events;
mod api_versions;
mod cidr;
mod completion;
mod compute_impl;
mod config;
mod data_disks;
mod disks;
mod emulator;
mod engine;
mod error;
mod faults;
mod force_detach;
mod galleries;
mod http;
mod image_reference;
mod images;
pub mod imds;
pub mod key_vault;
mod latency;
mod network_interfaces;
mod networks;
mod nic_addresses;
mod operations;
mod paths;
mod persist;
mod platform;
mod quota;
mod requests;
mod resource_graph;
mod scheduled_events;
mod seed;
mod sizes;
mod skus;
mod spot_prices;
mod state;
mod stats;
mod subnets;
mod usages;
mod virtual_machines;
mod virtual_networks;

use axum::Router;

pub use config::{ConfigError, EmulatorConfig};
pub use emulator::Emulator;
pub use error::ArmError;
pub use faults::{ActiveRule, FaultKind, FaultRule, FaultSet, InvalidRule, Target, glob};
pub use latency::{Latency, LatencyProfile, Step};
pub use quota::{LocationQuota, QuotaConfig, Restriction};
pub use requests::{REQUEST_LOG_CAPACITY, RequestFilter, RequestLog, RequestRecord};
pub use state::images::ImageConfig;
pub use stats::{Stats, operation_name};

/// The emulator's HTTP API: ARM routes, the Key Vault data plane under `/keyvault`, `/sandbox/*`
/// admin routes and `/healthz`.
pub fn app(emulator: Emulator) -> Router {
    emulator.ensure_ticker();
    let routes = Router::new()
        .merge(virtual_machines::routes())
        .merge(disks::routes())
        .merge(network_interfaces::routes())
        .merge(virtual_networks::routes())
        .merge(subnets::routes())
        .merge(skus::routes())
        .merge(usages::routes())
        .merge(images::routes())
        .merge(galleries::routes())
        .merge(operations::routes())
        .merge(resource_graph::routes())
        .merge(admin::routes())
        .merge(admin_events::routes())
        .merge(key_vault::routes(emulator.clone()))
        .merge(imds::routes(emulator.clone()))
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .fallback(|uri: axum::http::Uri| async move { ArmError::NoRoute(uri.path().to_owned()) })
        .layer(axum::middleware::from_fn_with_state(
            emulator.clone(),
            http::layer,
        ))
        .with_state(emulator);
    // Routing is exact but ARM paths are case-insensitive: respell before routing.
    Router::new().fallback_service(tower::ServiceExt::map_request(
        routes,
        paths::canonicalize as fn(axum::extract::Request) -> axum::extract::Request,
    ))
}
