//! Printing a machine run's progress for people: a line per finished step with its duration
//! and detail, a spinner on the running one when stderr is a terminal.

use std::collections::HashSet;
use std::io::IsTerminal;
use std::time::Duration;

use chrono::{DateTime, Utc};
use indicatif::{ProgressBar, ProgressStyle};
use nodewright_model::drain::{DrainMode, DrainStatus, PodState, VolumeState};
use nodewright_model::machine::{MachineStatus, Step, StepProgress, StepState};

/// A run's progress as the CLI shows it: its steps, and events worth a line of their own (pods
/// and volumes moving in a drain).
pub trait ShowsProgress {
    /// The steps, outcome and failure.
    fn run_status(&self) -> &MachineStatus;
    /// One line per event so far; each is printed once.
    fn events(&self) -> Vec<String> {
        Vec::new()
    }
}

impl ShowsProgress for MachineStatus {
    fn run_status(&self) -> &MachineStatus {
        self
    }
}

impl ShowsProgress for DrainStatus {
    fn run_status(&self) -> &MachineStatus {
        &self.run
    }

    fn events(&self) -> Vec<String> {
        drain_events(self)
    }
}

/// The lines a drain's status stands for: pods leaving, PDBs blocking, volumes moving, force.
pub fn drain_events(status: &DrainStatus) -> Vec<String> {
    let mut events = Vec::new();
    if let DrainMode::Force { reason } = &status.mode {
        events.push(format!("  ! force mode: {reason}"));
    }
    for pod in &status.pods {
        let line = match pod.state {
            PodState::Evicting => format!("evicting {}", pod.pod),
            PodState::Blocked => format!(
                "{} {}",
                pod.pod,
                pod.detail
                    .as_deref()
                    .unwrap_or("blocked by a PodDisruptionBudget")
            ),
            PodState::Gone => format!("{} left the node", pod.pod),
            PodState::ForceDeleted => format!(
                "{} {}",
                pod.pod,
                pod.detail
                    .as_deref()
                    .unwrap_or("deleted with grace period 0")
            ),
            PodState::Refused => format!(
                "{} {}",
                pod.pod,
                pod.detail
                    .as_deref()
                    .unwrap_or("refused: it would lose its local data")
            ),
            PodState::AwaitingCompletion => {
                format!("{} not evicted: waiting until it completes", pod.pod)
            }
            PodState::Completed => format!("{} completed", pod.pod),
            PodState::Held => format!(
                "{} not evicted: do not disrupt, waiting until it completes or force mode overrides it",
                pod.pod
            ),
            PodState::Waiting | PodState::Terminating | PodState::Skipped => continue,
        };
        events.push(format!("    ↳ {line}"));
    }
    for volume in &status.volumes {
        let pv = &volume.persistent_volume;
        let line = match volume.state {
            VolumeState::Attached | VolumeState::NotWaitedOn => continue,
            VolumeState::Detaching => format!("{pv} ({}) detaching", volume.pod),
            VolumeState::DetachTimedOut => format!("{pv} did not detach in time"),
            VolumeState::Reattaching => {
                format!("{pv} detached; waiting for it to attach elsewhere")
            }
            VolumeState::Reattached => format!(
                "{pv} attached on {}",
                volume.new_node.as_deref().unwrap_or("another node")
            ),
            VolumeState::ReattachTimedOut => format!("{pv} did not attach elsewhere in time"),
            VolumeState::ForceDetached => format!("{pv} force-detached"),
        };
        events.push(format!("    ↳ {line}"));
    }
    for lost in &status.local_data_lost {
        events.push(format!("  ! local data lost: {lost}"));
    }
    for overridden in &status.overridden {
        events.push(format!("  ! do-not-disrupt overridden: {overridden}"));
    }
    for warning in &status.warnings {
        events.push(format!("  ! {warning}"));
    }
    events
}

/// Seconds between two RFC 3339 instants, when both are known.
fn seconds_between(start: Option<&str>, end: Option<&str>) -> Option<i64> {
    let parse = |t: &str| {
        DateTime::parse_from_rfc3339(t)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    let (start, end) = (parse(start?)?, parse(end?)?);
    Some((end - start).num_seconds())
}

/// One step as a line: `✓ provision-vm   42s  provisioningState Succeeded`.
pub fn step_line(step: &StepProgress) -> String {
    let mark = match step.state {
        StepState::Done => "✓",
        StepState::Failed => "✗",
        StepState::Running => "…",
        StepState::Pending => " ",
    };
    let took = seconds_between(step.started_at.as_deref(), step.finished_at.as_deref())
        .map(|s| format!("{s}s"))
        .unwrap_or_default();
    let detail = step.detail.as_deref().unwrap_or("");
    format!("{mark} {:<19} {took:>5}  {detail}", step.step.as_str())
        .trim_end()
        .to_owned()
}

/// Prints every step of `status` (for `machine status`).
pub fn print_steps(status: &MachineStatus) {
    for step in &status.steps {
        println!("  {}", step_line(step));
    }
}

/// Follows a run: prints each step once it ends, spins on the running one.
pub struct LiveProgress {
    printed: HashSet<Step>,
    events: HashSet<String>,
    spinner: Option<ProgressBar>,
    started: std::time::Instant,
}

impl LiveProgress {
    /// A renderer on stderr (a spinner only when stderr is a terminal).
    pub fn new() -> Self {
        let spinner = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Self {
            printed: HashSet::new(),
            events: HashSet::new(),
            spinner,
            started: std::time::Instant::now(),
        }
    }

    /// Shows what changed since the last update.
    pub fn update<S: ShowsProgress>(&mut self, progress: &S) {
        for event in progress.events() {
            if self.events.insert(event.clone()) {
                self.line(event);
            }
        }
        let status = progress.run_status();
        for step in &status.steps {
            let ended = matches!(step.state, StepState::Done | StepState::Failed);
            if ended && self.printed.insert(step.step) {
                self.line(format!("  {}", step_line(step)));
            }
        }
        let elapsed = self.started.elapsed().as_secs();
        let message = match status.current() {
            Some(step) => format!("{step} ({elapsed}s elapsed)"),
            None => format!("waiting ({elapsed}s elapsed)"),
        };
        if let Some(bar) = &self.spinner {
            bar.set_message(message);
        }
    }

    /// Stops the spinner.
    pub fn finish(&mut self) {
        if let Some(bar) = self.spinner.take() {
            bar.finish_and_clear();
        }
    }

    fn line(&self, text: String) {
        match &self.spinner {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_step_shows_its_duration_and_detail() {
        let step = StepProgress {
            step: Step::ProvisionVm,
            state: StepState::Done,
            started_at: Some("2026-11-21T10:00:00Z".to_owned()),
            finished_at: Some("2026-11-21T10:00:42Z".to_owned()),
            detail: Some("provisioningState Succeeded".to_owned()),
        };
        assert_eq!(
            step_line(&step),
            "✓ provision-vm          42s  provisioningState Succeeded"
        );
    }
}
