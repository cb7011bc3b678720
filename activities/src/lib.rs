//! nodewright's side effects, as Temporal activities: one module per outside system.
//!
//! Every activity is thin (one outside call or one bounded wait), idempotent, and classifies each
//! error as retryable or not before it crosses the activity boundary ([`failure`]).

pub mod azure;
pub mod failure;
pub mod kube;
pub mod lifetime;
pub mod listing_cache;
pub mod metrics;
pub mod report;
pub mod temporal;
pub mod tls;
