//! Spot machines (issue 29): a pool's template asks for Spot VMs, and the machines are made as
//! Azure makes them (priority, eviction policy, maximum price), labelled and tainted for the
//! workloads that choose them.

mod create;
mod eviction;
mod fallback;

use std::path::{Path, PathBuf};

use anyhow::{Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::machines::write_pool_file;

/// The e2e pool file of `pool` (see [`write_pool_file`]) with `capacity` (YAML lines under
/// `template`, indented by four spaces) after its zones.
pub(crate) fn spot_pool_file(
    stack: &Stack,
    pool: &str,
    creation_timeout: &str,
    capacity: &str,
) -> Result<PathBuf> {
    let path = write_pool_file(stack, pool, creation_timeout)?;
    with_capacity(&path, capacity)?;
    Ok(path)
}

/// Adds `capacity` (YAML lines under `template`, indented by four spaces) after the zones of
/// the e2e pool file at `path`.
pub(crate) fn with_capacity(path: &Path, capacity: &str) -> Result<()> {
    let text = std::fs::read_to_string(path)?;
    let zones = "    zones: [\"1\", \"2\"]\n";
    ensure!(text.contains(zones), "the e2e pool file lists no zones");
    std::fs::write(path, text.replacen(zones, &format!("{zones}{capacity}"), 1))?;
    Ok(())
}
