//! DrainNode end to end, alone (`machine drain`) and as DeleteMachine's first step: workloads on
//! nodewright machines (Deployments, DaemonSets, StatefulSets on Azure Disk CSI volumes, pods on
//! Azure Files shares and NFS volumes, PDBs), the `nodewright` CLI against a `nodewright-worker`
//! process per test, and the world checked afterwards: pods, VolumeAttachments, disks in the
//! sandbox.

mod admission;
mod annotation;
pub(crate) mod common;
mod continued;
mod crash;
mod hard_deadline;
mod lanes;
mod late_pod;
mod local_data;
mod long_grace;
mod metrics;
mod not_ready;
mod outage;
mod pdb;
mod rules;
mod shares;
mod stateful;
mod story;
mod stuck_detach;
mod uncordon;
