//! Reading a pool file for the CLI: read, parse, validate, or say exactly what to fix.

use std::path::Path;

use nodewright_model::pool::{self, ValidPool};

use crate::CliError;

/// Reads and validates the pool file at `path`; every problem is an [`CliError::InvalidInput`]
/// naming the file, and the field and fix when the file is readable.
pub fn load(path: &Path) -> Result<ValidPool, CliError> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        CliError::InvalidInput(format!(
            "cannot read pool file {}: {error}; pass --pool with the path of a Pool YAML file (see examples/pools/workers.yaml)",
            path.display()
        ))
    })?;
    let parsed = pool::parse(&text).map_err(|error| {
        CliError::InvalidInput(format!(
            "pool file {}: {error}; nothing was started\n{}",
            path.display(),
            error.rendered
        ))
    })?;
    pool::validate(&parsed).map_err(|invalid| {
        CliError::InvalidInput(format!(
            "pool file {} is not valid; nothing was started:\n{invalid}",
            path.display()
        ))
    })
}
