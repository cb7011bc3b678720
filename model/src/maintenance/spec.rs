//! `spec.maintenance` as written in the pool file.

use serde::{Deserialize, Serialize};

/// `spec.maintenance`: when nodewright may disrupt the pool's machines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MaintenanceSpec {
    /// What the windows gate; `automatic` when absent.
    #[serde(default)]
    pub apply_to: ApplyTo,
    /// The recurring windows; none means nothing is gated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowSpec>,
}

/// One recurring window, `spec.maintenance.windows[i]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WindowSpec {
    /// When it opens: 5-field cron (`minute hour day-of-month month day-of-week`) read on the
    /// wall clock of `time_zone`, e.g. `0 2 * * 1-5`.
    pub schedule: String,
    /// How long it stays open, e.g. `4h` (humantime syntax, like the pool file's other
    /// durations); absolute time, whatever the clocks do meanwhile.
    pub duration: String,
    /// The IANA time zone of the schedule, e.g. `Europe/Berlin`; UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

/// What the maintenance windows gate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ApplyTo {
    /// Only rollouts nodewright starts by itself (image updates).
    #[default]
    Automatic,
    /// Every voluntary disruption: rollouts, scale-down, remediation replacements.
    All,
}

/// A disruption nodewright may cause to a pool's machines, for [`ApplyTo::gates`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DisruptionKind {
    /// A rollout nodewright started by itself (a newer image under `imageUpdate: auto`).
    AutomaticRollout,
    /// A rollout an operator started (a changed pool file, a rollback).
    OperatorRollout,
    /// Removing machines because `replicas` went down.
    ScaleDown,
    /// Replacing an unhealthy machine.
    Remediation,
}

impl ApplyTo {
    /// Whether a disruption of `kind` must wait for an open window.
    pub fn gates(self, kind: DisruptionKind) -> bool {
        match self {
            Self::All => true,
            Self::Automatic => kind == DisruptionKind::AutomaticRollout,
        }
    }
}
