//! Pools: the file people write ([`spec`]), how it is read ([`parse()`]) and checked
//! ([`validate()`]), what workflows get ([`ValidPool`]) and the template hash ([`template_hash`]).
//!
//! The CLI reads a file in two steps so that one run shows every problem:
//!
//! ```no_run
//! # fn main() -> Result<(), nodewright_model::pool::PoolError> {
//! let text = "apiVersion: nodewright.io/v1alpha1\n…";
//! let pool = nodewright_model::pool::from_yaml(text)?;
//! println!("{} machines of {}", pool.replicas, pool.template.vm_size);
//! # Ok(())
//! # }
//! ```

mod amount;
pub mod capacity_type;
pub mod credentials;
mod field_error;
mod hash;
mod image;
pub mod machine_capacity;
mod parse;
pub mod spec;
mod valid;
mod validate;

pub use amount::Amount;
pub use capacity_type::{CapacityType, EvictionPolicy, SpotSpec};
pub use credentials::credential_hints;
pub use field_error::FieldError;
pub use hash::{TEMPLATE_HASH_LEN, template_hash};
pub use parse::{PoolFileError, parse};
pub use spec::*;
pub use valid::{DrainPolicy, MachineTimeouts, RolloutStrategy, ValidPool};
pub(crate) use validate::received as validate_received;
pub use validate::{InvalidPool, MAX_POOL_NAME_LEN, MAX_REPLICAS, validate};

/// A pool file that cannot be used. Never retryable: the file has to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The text is not YAML shaped like a pool file ([`parse()`] failed).
    #[error(transparent)]
    Parse(#[from] PoolFileError),
    /// The file breaks validation rules ([`validate()`] failed); every problem is listed.
    #[error(transparent)]
    Invalid(#[from] InvalidPool),
}

/// [`parse()`]s and [`validate()`]s a pool file.
///
/// # Errors
///
/// [`PoolError::Parse`] when the text cannot be read as a pool file, and
/// [`PoolError::Invalid`] (with every problem) when its values break the rules.
pub fn from_yaml(text: &str) -> Result<ValidPool, PoolError> {
    Ok(validate(&parse(text)?)?)
}
