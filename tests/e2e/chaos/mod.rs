//! The chaos campaign: every way a run can be interrupted, and the world it must leave.
//! `kill` SIGKILLs the worker at the steps of one table, across CreateMachine, DeleteMachine,
//! DrainNode and RollingUpdate, and starts it again; each case runs on a pool, a task queue and a
//! worker of its own, so the cases run concurrently.

mod kill;
