//! nodewright's own binaries, as built by `cargo build --bins` (which `dev/test` runs first).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::{Result, bail};

use crate::stack::repo_root;

/// Path of a workspace binary in the target directory, or an error saying how to build it.
pub fn binary(name: &str) -> Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let path = target.join("debug").join(name);
    if !path.is_file() {
        bail!(
            "{} is missing: run `cargo build --bins` first",
            path.display()
        );
    }
    Ok(path)
}

/// A child process that is killed when dropped, so a failing test leaves nothing running.
pub struct KillOnDrop(pub Child);

impl KillOnDrop {
    /// Starts `command` with its output discarded.
    pub fn spawn(command: &mut Command) -> Result<Self> {
        Ok(Self(
            command
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?,
        ))
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
