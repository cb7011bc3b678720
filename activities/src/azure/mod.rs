//! Azure Resource Manager: a typed, thin client over `reqwest` (rustls) + `serde` for the VM,
//! NIC and managed disk operations nodewright uses, with its own async-operation polling and
//! error classification (the contract's decisions live in `nodewright_model::arm`).
//!
//! - [`client`]: [`ArmClient`] (endpoint, subscription, resource group, token, no retries).
//! - [`credential`]: static tokens (sandbox) and `azure_identity` credentials (real Azure).
//! - [`keyvault`]: [`KeyVaultClient`], reading a bootstrap secret from Azure Key Vault.
//! - [`operation`]: [`OperationHandle`] and [`Progress`], an async operation as plain data.
//! - [`poll`]: one poll of an operation, and a bounded wait.
//! - [`virtual_machines`], [`disks`], [`network_interfaces`]: typed bodies and REST calls.
//! - [`resource_graph`]: queries of Azure Resource Graph (one request for up to 1000 rows).
//! - [`error`]: [`Error`], named after the failed step, classified for Temporal.

pub mod client;
pub mod credential;
pub mod disks;
pub mod error;
pub mod headroom;
pub mod images;
pub mod inventory;
pub mod keyvault;
pub mod machines;
pub mod network_interfaces;
pub mod operation;
pub mod permissions;
pub mod poll;
pub mod resource;
pub mod resource_graph;
pub mod virtual_machines;

pub use client::{ArmClient, ArmConfig, DEFAULT_ENDPOINT, Deletion, Submitted};
pub use credential::{Credential, CredentialKind, DEFAULT_SCOPE};
pub use error::{CallError, Error, Result};
pub use keyvault::{KeyVaultClient, KeyVaultError};
pub use nodewright_model::arm::poll_schedule::OperationKind;
pub use operation::{OperationHandle, PollClock, PollProtocol, Progress};
pub use resource::{Properties, Resource, SubResource};
