//! Azure Resource Manager: the resource shapes nodewright reads and writes. The REST client and
//! its activities arrive with the sandbox issue; the contract's decisions live in
//! `nodewright_model::arm`.

pub mod resource;

pub use resource::{Properties, Resource};
