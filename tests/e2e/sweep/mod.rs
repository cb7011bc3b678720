//! OrphanSweep end to end: what it deletes and keeps in a seeded resource group and cluster,
//! a machine kept by a failed create, the freeze, the approval gate, dry run, the schedule, and
//! a 10,000-resource benchmark.

mod approval;
pub(crate) mod common;
mod freeze;
mod kept;
mod remediate;
mod scale;
mod scenario;
mod schedule;
