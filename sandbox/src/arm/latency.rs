//! Latency profiles: how long each emulated operation takes, drawn at random within a range and
//! multiplied by a scale factor.

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

/// The longest any sampled latency is, whatever the scale: a huge `latency_scale` must not
/// overflow `Duration` or the clock arithmetic of operation deadlines (a panic under the lock).
pub const MAX_SAMPLE: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// A named set of operation latencies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatencyProfile {
    /// Everything completes on the first poll (unit tests).
    Instant,
    /// Operations of about 0.2-2 s (end-to-end tests).
    #[default]
    Short,
    /// Azure-like latencies (demos and benchmarks): a VM create takes a minute or two.
    Realistic,
}

impl std::str::FromStr for LatencyProfile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "instant" => Ok(Self::Instant),
            "short" => Ok(Self::Short),
            "realistic" => Ok(Self::Realistic),
            other => Err(format!(
                "unknown latency profile \"{other}\" (instant|short|realistic)"
            )),
        }
    }
}

/// A kind of emulated work that takes time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// VM PUT that creates.
    VmCreate,
    /// VM PUT/PATCH that changes nothing about disks.
    VmUpdate,
    /// VM DELETE.
    VmDelete,
    /// VM start, powerOff, deallocate.
    VmPower,
    /// Disk PUT that creates.
    DiskCreate,
    /// Disk PUT/PATCH on an existing disk.
    DiskUpdate,
    /// Disk DELETE.
    DiskDelete,
    /// Attaching a data disk.
    DiskAttach,
    /// Detaching a data disk.
    DiskDetach,
    /// NIC PUT.
    NicCreate,
    /// NIC DELETE.
    NicDelete,
    /// From provisioning success (or start) to a guest a kubelet runs on.
    Boot,
}

impl LatencyProfile {
    /// The unscaled range, in seconds, of `step` under this profile.
    pub fn range(self, step: Step) -> (f64, f64) {
        use Step::*;
        match self {
            Self::Instant => (0.0, 0.0),
            Self::Short => match step {
                VmCreate => (0.6, 1.5),
                VmUpdate | VmPower => (0.2, 0.5),
                VmDelete => (0.4, 1.0),
                DiskCreate | DiskUpdate | DiskDelete | NicCreate | NicDelete => (0.2, 0.4),
                DiskAttach => (0.2, 0.6),
                DiskDetach => (0.3, 1.0),
                Boot => (0.5, 2.0),
            },
            Self::Realistic => match step {
                VmCreate => (60.0, 120.0),
                VmUpdate => (5.0, 20.0),
                VmDelete => (240.0, 360.0),
                VmPower => (20.0, 60.0),
                DiskCreate => (2.0, 6.0),
                DiskUpdate => (2.0, 5.0),
                DiskDelete => (2.0, 10.0),
                DiskAttach => (5.0, 15.0),
                DiskDetach => (10.0, 60.0),
                NicCreate => (2.0, 5.0),
                NicDelete => (2.0, 10.0),
                Boot => (20.0, 40.0),
            },
        }
    }
}

/// A profile and its scale factor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// The profile.
    pub profile: LatencyProfile,
    /// Every duration is multiplied by this (>= 0).
    pub scale: f64,
}

impl Latency {
    /// A duration for `step`, drawn uniformly in the scaled range.
    pub fn sample(&self, step: Step) -> Duration {
        let (low, high) = self.profile.range(step);
        let scale = if self.scale.is_finite() && self.scale > 0.0 {
            self.scale
        } else {
            0.0
        };
        let cap = MAX_SAMPLE.as_secs_f64();
        let (low, high) = ((low * scale).min(cap), (high * scale).min(cap));
        let secs = if high > low {
            rand::rng().random_range(low..=high)
        } else {
            low
        };
        Duration::from_secs_f64(secs.clamp(0.0, cap))
    }

    /// The longest of the samples of `steps` (zero for none).
    pub fn sample_max(&self, steps: &[Step]) -> Duration {
        steps
            .iter()
            .map(|s| self.sample(*s))
            .max()
            .unwrap_or_default()
    }
}

/// The `Retry-After` seconds an operation's answers carry (`None`: no header): on the write
/// that accepted it, and on each poll while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryAfter {
    /// On the accepting write (201/202).
    pub accepted: Option<u64>,
    /// On a status or `Location` poll while the operation runs.
    pub running: Option<u64>,
}

impl LatencyProfile {
    /// What `provider`'s operations ask clients to wait, as Azure's providers answer:
    /// Microsoft.Compute sends no `Retry-After` on VM and disk operations (clients keep their
    /// own schedule), the network provider asks for 1 s on the write and 10 s on each poll while
    /// the operation runs. `short` asks for 1 s everywhere, so that end-to-end tests notice their
    /// sub-second operations quickly; `instant` for 0.
    pub fn retry_after(self, provider: &str) -> RetryAfter {
        let both = |seconds| RetryAfter {
            accepted: Some(seconds),
            running: Some(seconds),
        };
        match self {
            Self::Instant => both(0),
            Self::Short => both(1),
            Self::Realistic if provider.eq_ignore_ascii_case("Microsoft.Network") => RetryAfter {
                accepted: Some(1),
                running: Some(10),
            },
            Self::Realistic => RetryAfter::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STEPS: [Step; 12] = [
        Step::VmCreate,
        Step::VmUpdate,
        Step::VmDelete,
        Step::VmPower,
        Step::DiskCreate,
        Step::DiskUpdate,
        Step::DiskDelete,
        Step::DiskAttach,
        Step::DiskDetach,
        Step::NicCreate,
        Step::NicDelete,
        Step::Boot,
    ];

    #[test]
    fn instant_is_always_zero_and_retry_after_zero() {
        let latency = Latency {
            profile: LatencyProfile::Instant,
            scale: 5.0,
        };
        for step in STEPS {
            assert_eq!(latency.sample(step), Duration::ZERO);
        }
        assert_eq!(
            LatencyProfile::Instant
                .retry_after("Microsoft.Compute")
                .running,
            Some(0)
        );
    }

    #[test]
    fn realistic_retry_after_is_azures_per_provider() {
        let compute = LatencyProfile::Realistic.retry_after("Microsoft.Compute");
        assert_eq!(compute, RetryAfter::default());
        let network = LatencyProfile::Realistic.retry_after("Microsoft.Network");
        assert_eq!((network.accepted, network.running), (Some(1), Some(10)));
        let short = LatencyProfile::Short.retry_after("Microsoft.Compute");
        assert_eq!((short.accepted, short.running), (Some(1), Some(1)));
    }

    #[test]
    fn a_huge_scale_is_capped_instead_of_overflowing() {
        for scale in [1e12, 2e306, 1e300, f64::MAX] {
            let latency = Latency {
                profile: LatencyProfile::Realistic,
                scale,
            };
            assert_eq!(latency.sample(Step::VmCreate), MAX_SAMPLE, "{scale}");
        }
    }

    #[test]
    fn realistic_vm_create_takes_one_to_two_minutes() {
        assert_eq!(
            LatencyProfile::Realistic.range(Step::VmCreate),
            (60.0, 120.0)
        );
    }

    proptest! {
        #[test]
        fn samples_stay_within_the_scaled_range(scale in 0.0f64..10.0, i in 0usize..12) {
            for profile in [LatencyProfile::Short, LatencyProfile::Realistic] {
                let step = STEPS[i];
                let (low, high) = profile.range(step);
                let d = Latency { profile, scale }.sample(step).as_secs_f64();
                prop_assert!(d >= low * scale - 1e-9 && d <= high * scale + 1e-9);
            }
        }
    }
}
