//! PoolController end to end: pools kept by `nodewright pool apply` against a
//! `nodewright-worker` process per test, the world (VMs in the sandbox, Nodes in the apiserver)
//! changed under them, and the controller's status and the world checked afterwards.

mod apply;
pub(crate) mod common;
mod crash;
mod health;
mod ladder;
mod replicas;
mod rollouts;
mod scale;
