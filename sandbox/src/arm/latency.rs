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
                VmDelete => (30.0, 60.0),
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

/// `Retry-After` seconds for an operation expected to take `expected`: 0 when instant, otherwise
/// a quarter of it, at least 1 and at most 15.
pub fn retry_after(expected: Duration) -> u64 {
    if expected.is_zero() {
        return 0;
    }
    (expected.as_secs_f64() / 4.0).ceil().clamp(1.0, 15.0) as u64
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
        assert_eq!(retry_after(Duration::ZERO), 0);
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

        #[test]
        fn retry_after_is_small_and_positive_for_real_work(ms in 1u64..1_000_000) {
            let r = retry_after(Duration::from_millis(ms));
            prop_assert!((1..=15).contains(&r));
        }
    }
}
