//! Whether a disruption may start now ([`gate`]): not gated (no windows, or `applyTo` does not
//! cover its kind), inside an open window, or waiting for the next one.

use super::{DisruptionKind, MaintenanceSpec, WindowState, validate};

/// What the maintenance windows say about a disruption now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// No window gates it.
    Ungated,
    /// A window is open.
    Open(WindowState),
    /// It waits: no window is open.
    Closed(WindowState),
}

impl Gate {
    /// Whether the disruption may start now.
    pub fn allows(&self) -> bool {
        !matches!(self, Self::Closed(_))
    }

    /// When a closed gate opens, Unix seconds.
    pub fn opens_at(&self) -> Option<i64> {
        match self {
            Self::Closed(WindowState::Closed { opens_at }) => *opens_at,
            _ => None,
        }
    }

    /// The state in words for a status, when gated: `closed; opens 2026-11-30 02:00 UTC`.
    pub fn words(&self) -> Option<String> {
        match self {
            Self::Ungated => None,
            Self::Open(state) | Self::Closed(state) => Some(state.words()),
        }
    }
}

/// The gate of `spec` for a disruption of `kind` at `now` (Unix seconds). A spec that does not
/// validate (only a pool recorded before a rule could hold one) gates nothing.
pub fn gate(spec: Option<&MaintenanceSpec>, kind: DisruptionKind, now: i64) -> Gate {
    let Some(spec) = spec.filter(|s| !s.windows.is_empty() && s.apply_to.gates(kind)) else {
        return Gate::Ungated;
    };
    let Ok(windows) = validate("spec.maintenance", spec) else {
        return Gate::Ungated;
    };
    match windows.state_at(now) {
        open @ WindowState::Open { .. } => Gate::Open(open),
        closed @ WindowState::Closed { .. } => Gate::Closed(closed),
    }
}

#[cfg(test)]
mod gate_tests {
    use super::*;
    use crate::maintenance::{ApplyTo, WindowSpec};

    /// 2026-11-30 01:00:00 UTC, a Monday.
    const MONDAY_1AM: i64 = 1_796_000_400;

    fn spec(apply_to: ApplyTo) -> MaintenanceSpec {
        MaintenanceSpec {
            apply_to,
            windows: vec![WindowSpec {
                schedule: "0 2 * * 1".to_owned(),
                duration: "2h".to_owned(),
                time_zone: None,
            }],
        }
    }

    #[test]
    fn only_the_kinds_apply_to_names_wait_for_a_window() {
        let automatic = spec(ApplyTo::Automatic);
        let all = spec(ApplyTo::All);
        let table = [
            (
                None,
                DisruptionKind::AutomaticRollout,
                MONDAY_1AM,
                true,
                None,
            ),
            (
                Some(&automatic),
                DisruptionKind::OperatorRollout,
                MONDAY_1AM,
                true,
                None,
            ),
            (
                Some(&automatic),
                DisruptionKind::AutomaticRollout,
                MONDAY_1AM,
                false,
                Some(MONDAY_1AM + 3600),
            ),
            (
                Some(&all),
                DisruptionKind::ScaleDown,
                MONDAY_1AM,
                false,
                Some(MONDAY_1AM + 3600),
            ),
            (
                Some(&all),
                DisruptionKind::Remediation,
                MONDAY_1AM + 3600,
                true,
                None,
            ),
            (
                Some(&all),
                DisruptionKind::OperatorRollout,
                MONDAY_1AM + 3 * 3600,
                false,
                Some(MONDAY_1AM + 3600 + 7 * 86_400),
            ),
        ];
        for (row, (spec, kind, now, allows, opens_at)) in table.into_iter().enumerate() {
            let gate = gate(spec, kind, now);
            assert_eq!(gate.allows(), allows, "row {row}: {gate:?}");
            assert_eq!(gate.opens_at(), opens_at, "row {row}: {gate:?}");
        }
        assert_eq!(
            gate(Some(&all), DisruptionKind::ScaleDown, MONDAY_1AM)
                .words()
                .as_deref(),
            Some("closed; opens 2026-11-30 02:00 UTC")
        );
        assert_eq!(
            gate(None, DisruptionKind::ScaleDown, MONDAY_1AM).words(),
            None
        );
    }
}
