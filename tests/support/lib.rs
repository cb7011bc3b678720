//! Support for nodewright's end-to-end tests: the local stack's settings and clients, polling
//! with deadlines, holds at the Kubernetes API, and objects that clean up after a test whether
//! it passes or fails.
//!
//! The stack comes from `dev/stack up`, which writes `.run/env`; the tests read their settings
//! from the process environment first and from that file otherwise, so `cargo test -p
//! nodewright-tests --test e2e` works in a shell that never sourced it.

pub mod admission;
pub mod api_proxy;
pub mod bench;
pub mod binaries;
pub mod codec;
pub mod deploy_objects;
pub mod documents;
pub mod identity;
pub mod images;
pub mod kube_objects;
pub mod machines;
pub mod monitoring;
pub mod poll;
pub mod sandbox_admin;
pub mod scrape;
pub mod secrets;
pub mod stack;
pub mod temporal_server;
pub mod temporal_worker;
pub mod timeline;
pub mod worker_meters;
pub mod worker_process;
pub mod workloads;

pub use poll::eventually;
pub use stack::Stack;
