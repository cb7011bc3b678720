//! A pool's machines as a rollout sees them: template, health, age and whether a create or delete
//! is under way.

use serde::{Deserialize, Serialize};

/// How a machine is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Health {
    /// Its Node is Ready.
    Ready,
    /// Its VM exists but its Node is not Ready (or not registered yet) since this Unix second.
    NotReady {
        /// Unix seconds since when.
        since: i64,
    },
    /// Its VM failed to provision (`provisioningState: Failed`).
    Failed,
}

/// Whether something is already being done to a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Activity {
    /// Nothing: it serves (or fails) as it is.
    Idle,
    /// A CreateMachine run is bringing it up.
    Creating,
    /// A DeleteMachine run (or a drain) is taking it down.
    Deleting,
}

/// One machine of the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedMachine {
    /// The machine's name.
    pub name: String,
    /// The template hash it was built from (its `nodewright.io-template` tag).
    pub template_hash: String,
    /// How it is doing.
    pub health: Health,
    /// When it was created, Unix seconds (its `nodewright.io-created` tag).
    pub created_at: i64,
    /// What is being done to it.
    pub activity: Activity,
    /// Whether its Node carries the `nodewright.io/outdated` taint.
    #[serde(default)]
    pub tainted_outdated: bool,
}

impl ObservedMachine {
    /// Serves workloads now: Ready and not being taken down.
    pub fn is_available(&self) -> bool {
        self.health == Health::Ready && self.activity != Activity::Deleting
    }

    /// Broken for good: its VM failed, or its Node has not been Ready for `health_timeout`
    /// seconds (a machine still being created is never unhealthy: its create bounds itself).
    pub fn is_unhealthy(&self, now: i64, health_timeout_secs: i64) -> bool {
        if self.activity == Activity::Creating {
            return false;
        }
        match self.health {
            Health::Ready => false,
            Health::Failed => true,
            Health::NotReady { since } => now.saturating_sub(since) >= health_timeout_secs,
        }
    }
}
