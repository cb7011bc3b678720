//! nodewright's own binaries, as built by `cargo build --bins` (which `dev/test` runs first).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::stack::repo_root;

/// The environment variable naming the build profile whose binaries the tests and benchmarks
/// run: `debug` (the default, `cargo build --bins`) or `release` (`cargo build --release
/// --bins`, as `dev/bench` builds them).
pub const PROFILE_VARIABLE: &str = "NODEWRIGHT_BINARIES_PROFILE";

/// Path of a workspace binary in the target directory, or an error saying how to build it.
pub fn binary(name: &str) -> Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let profile = std::env::var(PROFILE_VARIABLE).unwrap_or_else(|_| "debug".to_owned());
    let build = match profile.as_str() {
        "debug" => "cargo build --bins",
        "release" => "cargo build --release --bins",
        other => bail!("{PROFILE_VARIABLE}={other}: use debug or release"),
    };
    let path = target.join(&profile).join(name);
    if !path.is_file() {
        bail!("{} is missing: run `{build}` first", path.display());
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

/// Runs `command` (its stdout and stderr piped by the caller) to the end, like
/// [`Command::output`], but kills it and fails with what it printed so far when it runs longer
/// than `limit`: a hanging process fails its test instead of hanging the whole suite.
pub fn output_within(mut command: Command, limit: Duration) -> Result<Output> {
    let mut child = KillOnDrop(command.spawn()?);
    let stdout = drain(child.0.stdout.take());
    let stderr = drain(child.0.stderr.take());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait()? {
            break Some(status);
        }
        if started.elapsed() >= limit {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Killing first closes the pipes, so the readers end.
    let _ = child.0.kill();
    let text = |reader: std::thread::JoinHandle<Vec<u8>>| reader.join().unwrap_or_default();
    let (stdout, stderr) = (text(stdout), text(stderr));
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => bail!(
            "still running after {}s, killed\nstdout: {}\nstderr: {}",
            limit.as_secs(),
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        ),
    }
}

/// Reads a pipe to its end on a thread of its own (so that a full pipe never blocks the child).
fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use super::output_within;

    fn shell(script: &str) -> Command {
        let mut command = Command::new("sh");
        command
            .args(["-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    #[test]
    fn a_process_that_ends_in_time_gives_its_status_and_output() {
        let output = output_within(
            shell("echo out; echo err >&2; exit 3"),
            Duration::from_secs(30),
        )
        .expect("ran");
        assert_eq!(output.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&output.stdout), "out\n");
        assert_eq!(String::from_utf8_lossy(&output.stderr), "err\n");
    }

    #[test]
    fn a_process_past_its_limit_is_killed_and_fails_with_what_it_printed() {
        let error = output_within(
            shell("echo waiting; exec sleep 30"),
            Duration::from_millis(300),
        )
        .expect_err("killed");
        let message = error.to_string();
        assert!(message.contains("still running after 0s"), "{message}");
        assert!(message.contains("waiting"), "{message}");
    }
}
