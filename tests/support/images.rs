//! nodewright's container images, as `dev/images build` leaves them: their names and podman's
//! settings for this machine (`$NODEWRIGHT_RUN_DIR/images.env`), what an image's config says, and
//! containers that are removed when dropped.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::stack::{parse_env_file, run_dir};

/// The images built by `dev/images build` and how to run podman here.
#[derive(Debug, Clone)]
pub struct Images {
    /// The worker and CLI image (`Dockerfile`).
    pub worker: String,
    /// The sandbox image (`sandbox/Dockerfile`).
    pub sandbox: String,
    /// `registry` (the Dockerfiles' own bases) or `stand-in` (bases made from Debian's packages).
    pub bases: String,
    containers_conf: String,
}

impl Images {
    /// Reads `images.env` from the stack's run directory; fails with the command that writes it.
    pub fn load() -> Result<Self> {
        let path = run_dir().join("images.env");
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "{} is missing: build the images with `dev/images build` (dev/test does)",
                path.display()
            )
        })?;
        let values = parse_env_file(&text);
        let get = |key: &str| -> Result<String> {
            values
                .get(key)
                .cloned()
                .with_context(|| format!("{} has no {key}", path.display()))
        };
        let images = Self {
            worker: get("NODEWRIGHT_IMAGE")?,
            sandbox: get("NODEWRIGHT_SANDBOX_IMAGE")?,
            bases: get("NODEWRIGHT_IMAGE_BASES")?,
            containers_conf: get("CONTAINERS_CONF")?,
        };
        for image in [&images.worker, &images.sandbox] {
            let output = images.podman(&["image", "exists", image])?;
            if !output.status.success() {
                bail!("image {image} is not in podman's storage: run `dev/images build`");
            }
        }
        Ok(images)
    }

    /// A `podman` command with this machine's containers.conf.
    pub fn command(&self) -> Command {
        let mut command = Command::new("podman");
        command
            .env("CONTAINERS_CONF", &self.containers_conf)
            .stdin(Stdio::null());
        command
    }

    /// Runs `podman args…` and captures its output.
    pub fn podman(&self, args: &[&str]) -> Result<Output> {
        self.command()
            .args(args)
            .output()
            .with_context(|| format!("running podman {}", args.join(" ")))
    }

    /// The image's config (`podman image inspect`): user, entrypoint, ports, labels, env, size.
    pub fn inspect(&self, image: &str) -> Result<Value> {
        let output = self.podman(&["image", "inspect", image])?;
        if !output.status.success() {
            bail!(
                "podman image inspect {image}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let mut list: Value = serde_json::from_slice(&output.stdout)?;
        Ok(list[0].take())
    }

    /// `podman run -d --name <name> <args…>`: a detached container, removed when dropped.
    pub fn start(&self, name: &str, args: &[String]) -> Result<Container> {
        let mut command = self.command();
        command.args(["run", "-d", "--name", name]).args(args);
        let output = command
            .output()
            .with_context(|| format!("starting container {name}"))?;
        let container = Container {
            name: name.to_owned(),
            images: self.clone(),
        };
        if !output.status.success() {
            bail!(
                "podman run {name} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(container)
    }
}

/// A container started by [`Images::start`]; `podman rm -f` when dropped.
pub struct Container {
    /// The container's name.
    pub name: String,
    images: Images,
}

impl Container {
    /// What the container wrote to stdout and stderr so far.
    pub fn logs(&self) -> String {
        match self.images.podman(&["logs", &self.name]) {
            Ok(output) => format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
            Err(error) => format!("(podman logs failed: {error})"),
        }
    }

    /// The container's state (`podman inspect`'s `State`: Status, Pid, ExitCode…).
    pub fn state(&self) -> Result<Value> {
        let output = self.images.podman(&["inspect", &self.name])?;
        if !output.status.success() {
            bail!(
                "podman inspect {}: {}",
                self.name,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let mut list: Value = serde_json::from_slice(&output.stdout)?;
        Ok(list[0]["State"].take())
    }

    /// The user and group ids the container's first process runs as, read from the host's
    /// `/proc/<pid>/status` (real, effective, saved and filesystem ids must agree).
    pub fn process_ids(&self) -> Result<(u32, u32)> {
        let pid = self.state()?["Pid"]
            .as_u64()
            .with_context(|| format!("container {} has no Pid", self.name))?;
        let status =
            std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("status"))?;
        let ids = |field: &str| -> Result<u32> {
            let line = status
                .lines()
                .find(|line| line.starts_with(field))
                .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
            let values: Vec<&str> = line.split_whitespace().skip(1).collect();
            if values.windows(2).any(|pair| pair[0] != pair[1]) {
                bail!("{line}: the ids differ");
            }
            Ok(values.first().context("no ids")?.parse()?)
        };
        Ok((ids("Uid:")?, ids("Gid:")?))
    }

    /// `podman stop -t <grace>` (SIGTERM, SIGKILL after `grace` seconds); returns the exit code.
    pub fn stop(&self, grace_seconds: u32) -> Result<i64> {
        let grace = grace_seconds.to_string();
        let output = self.images.podman(&["stop", "-t", &grace, &self.name])?;
        if !output.status.success() {
            bail!(
                "podman stop {}: {}",
                self.name,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        self.state()?["ExitCode"]
            .as_i64()
            .with_context(|| format!("container {} has no ExitCode", self.name))
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.images.podman(&["rm", "-f", "-t", "0", &self.name]);
    }
}
