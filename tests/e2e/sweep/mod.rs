//! OrphanSweep end to end: what it deletes and keeps in a seeded resource group and cluster,
//! a machine kept by a failed create, the freeze, the approval gate, the plausibility brake, the
//! fresh plan after an approval, one sweep per cluster, dry run, the schedule, and a
//! 10,000-resource benchmark.

mod approval;
mod brake;
pub(crate) mod common;
mod freeze;
mod kept;
mod overlap;
mod paging;
mod remediate;
mod replan;
mod scale;
mod scenario;
mod schedule;
