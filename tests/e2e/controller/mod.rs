//! PoolController end to end: pools kept by `nodewright pool apply` against a
//! `nodewright-worker` process per test, the world (VMs in the sandbox, Nodes in the apiserver)
//! changed under them, and the controller's status and the world checked afterwards.

mod apply;
mod cancel;
pub(crate) mod common;
mod crash;
mod detection;
mod health;
mod ladder;
mod lease;
mod never_registered;
mod replicas;
mod rollouts;
mod scale;
mod window;
