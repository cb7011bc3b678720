//! End-to-end tests against the real local stack (`dev/stack up`): one test binary, one module
//! per area. Run them with `dev/test`, or `cargo test -p nodewright-tests --test e2e` once the
//! stack is up.

mod admission_policy;
mod bootstrap_token;
mod cancel;
mod chaos;
mod cli;
mod controller;
mod deadline;
mod deployment;
mod drain;
mod encryption;
mod headroom;
mod hostile_inputs;
mod image;
mod image_updates;
mod isolation;
mod keyvault;
mod kubernetes_smoke;
mod machines;
mod monitoring;
mod node_agent;
mod plain_text;
mod preflight;
mod rbac;
mod rollout;
mod sandbox;
mod secrets;
mod spot;
mod sweep;
mod temporal_smoke;
mod ui;
mod ui_codec;
mod volumes;
mod worker;
