//! The chaos campaign: every way a run can be interrupted, and the world it must leave.
//! `kill` SIGKILLs the worker at the steps of one table, across CreateMachine, DeleteMachine,
//! DrainNode and RollingUpdate, and starts it again; each case runs on a pool, a task queue and a
//! worker of its own, so the cases run concurrently. `two_workers` SIGKILLs one of two workers
//! of a task queue for good in the middle of a 20-machine rollout, and the other finishes it.
//! `temporal_restart` SIGKILLs and restarts a Temporal server of the test's own in the middle
//! of a drain held by a PodDisruptionBudget, and the drain completes.

mod kill;
mod temporal_restart;
mod two_workers;
