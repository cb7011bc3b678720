//! `nodewright-sandbox`: the local stand-in for Azure and for kubelets.
//!
//! - [`arm`]: the ARM emulator (VMs, NICs, managed disks, async operations, latency profiles,
//!   fault injection, stats), served by axum;
//! - [`joiner`]: the node joiner, registering a Node for every booted VM as its kubelet would;
//! - [`attacher`]: the disk attacher, playing the Azure Disk CSI controller for VolumeAttachments;
//! - [`compute`]: the seam between the emulator and those two;
//! - [`tls`]: the one rustls crypto provider the process uses.

pub mod arm;
pub mod attacher;
pub mod compute;
pub mod joiner;
pub mod tls;
