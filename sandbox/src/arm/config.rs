//! The emulator's settings, read from a TOML file (`--config` / `NODEWRIGHT_SANDBOX_CONFIG`).
//!
//! ```toml
//! latency = "short"          # instant | short | realistic
//! latency_scale = 1.0
//! page_size = 50
//! token = "secret"           # require `Authorization: Bearer secret`
//! state_file = "/var/lib/sandbox/state.json"
//! nic_reservation_seconds = 180  # how long a failed/canceled create or a VM delete holds its NICs
//! eviction_notice_seconds = 30   # a Spot eviction's Preempt Scheduled Event comes this long before it
//!
//! [[images]]                 # marketplace image versions besides the built-in catalog
//! publisher = "Canonical"
//! offer = "ubuntu-24_04-lts"
//! sku = "server"
//! versions = ["24.04.202601010"]
//!
//! [[faults]]
//! kind = "fail_operation"    # throttle | server_error | conflict | fail_operation | hang_detach | never_joins | repeat_next_link
//! operation = "vm.put"       # glob over operation names
//! vm = "pool-a-*"            # glob over VM names
//! code = "AllocationFailed"
//! count = 1
//!
//! [[faults]]
//! kind = "throttle"
//! method = "write"           # PUT|PATCH|DELETE|POST; or a list such as "PUT|DELETE"
//! every = 3                  # every third matching request
//! retry_after = 2
//!
//! [quota]                    # vCPU limits and size restrictions (see `quota.rs`)
//! regional_vcpus = 64
//! families = { standardDSv5Family = 16 }
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::faults::FaultRule;
use super::latency::LatencyProfile;
use super::quota::QuotaConfig;
use super::state::images::ImageConfig;

/// Everything the emulator can be configured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmulatorConfig {
    /// Latency profile.
    pub latency: LatencyProfile,
    /// Factor applied to every latency.
    pub latency_scale: f64,
    /// Items per page of a list answer.
    pub page_size: usize,
    /// Bearer token clients must send; none required when unset.
    pub token: Option<String>,
    /// File the state is persisted to after every change and loaded from at start.
    pub state_file: Option<PathBuf>,
    /// How long, in seconds, a VM's NICs stay reserved for it after its create ended `Failed` or
    /// `Canceled` or after it was deleted: a NIC DELETE, or a VM PUT naming such a NIC for
    /// another VM, is refused with 400 `NicReservedForAnotherVm` meanwhile (Azure: 180 s).
    pub nic_reservation_seconds: u64,
    /// Fault rules in force at start.
    pub faults: Vec<FaultRule>,
    /// Quota limits and size restrictions (`[quota]`, see `quota.rs`).
    pub quota: QuotaConfig,
    /// Marketplace image versions offered besides the built-in catalog
    /// (`state::images::default_catalog`).
    pub images: Vec<ImageConfig>,
    /// How long, in seconds, a Spot eviction's `Preempt` Scheduled Event comes before the
    /// eviction (Azure: at least 30 s, best effort); 0 evicts at once.
    pub eviction_notice_seconds: u64,
}

/// Azure's minimum notice of a Spot eviction, the default of `eviction_notice_seconds`.
pub const AZURE_EVICTION_NOTICE_SECONDS: u64 = 30;

/// The longest eviction notice accepted (an hour).
pub const MAX_EVICTION_NOTICE_SECONDS: u64 = 3600;

/// Azure's NIC reservation window, the default of `nic_reservation_seconds`.
pub const AZURE_NIC_RESERVATION_SECONDS: u64 = 180;

/// The longest NIC reservation window accepted (a day).
const MAX_NIC_RESERVATION_SECONDS: u64 = 86_400;

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            latency: LatencyProfile::Short,
            latency_scale: 1.0,
            page_size: 50,
            token: None,
            state_file: None,
            nic_reservation_seconds: AZURE_NIC_RESERVATION_SECONDS,
            faults: Vec::new(),
            quota: QuotaConfig::default(),
            images: Vec::new(),
            eviction_notice_seconds: AZURE_EVICTION_NOTICE_SECONDS,
        }
    }
}

/// Why the emulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config or state file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The config file is not valid TOML for [`EmulatorConfig`].
    #[error("invalid config: {0}")]
    Toml(#[from] toml::de::Error),
    /// A setting is out of range.
    #[error("invalid config: {0}")]
    Invalid(String),
}

impl EmulatorConfig {
    /// Parses a TOML config.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Reads and parses a TOML config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(&text)
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.page_size == 0 {
            return Err(ConfigError::Invalid("page_size must be at least 1".into()));
        }
        if !self.latency_scale.is_finite() || self.latency_scale < 0.0 {
            return Err(ConfigError::Invalid(
                "latency_scale must be a finite number >= 0".into(),
            ));
        }
        if self.nic_reservation_seconds > MAX_NIC_RESERVATION_SECONDS {
            return Err(ConfigError::Invalid(format!(
                "nic_reservation_seconds must be at most {MAX_NIC_RESERVATION_SECONDS} (a day); Azure's is {AZURE_NIC_RESERVATION_SECONDS}"
            )));
        }
        if self.eviction_notice_seconds > MAX_EVICTION_NOTICE_SECONDS {
            return Err(ConfigError::Invalid(format!(
                "eviction_notice_seconds must be at most {MAX_EVICTION_NOTICE_SECONDS}; Azure's is {AZURE_EVICTION_NOTICE_SECONDS}"
            )));
        }
        self.quota
            .validate()
            .map_err(|e| ConfigError::Invalid(format!("[quota] {}: {}", e.field, e.message)))?;
        for (i, rule) in self.faults.iter().enumerate() {
            rule.validate()
                .map_err(|e| ConfigError::Invalid(format!("[[faults]] #{}: {e}", i + 1)))?;
        }
        for (i, image) in self.images.iter().enumerate() {
            if let Some(problem) = image.problem() {
                return Err(ConfigError::Invalid(format!(
                    "[[images]] #{}: {problem}",
                    i + 1
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_config_parses() {
        let config = EmulatorConfig::from_toml(
            r#"
            latency = "instant"
            latency_scale = 0.5
            page_size = 10
            token = "t"
            [[faults]]
            kind = "never_joins"
            vm = "stuck-*"
            "#,
        )
        .unwrap();
        assert_eq!(config.latency, LatencyProfile::Instant);
        assert_eq!(config.page_size, 10);
        assert_eq!(config.faults.len(), 1);
    }

    #[test]
    fn an_empty_config_is_the_default_and_a_zero_page_size_is_refused() {
        assert_eq!(
            EmulatorConfig::from_toml("").unwrap(),
            EmulatorConfig::default()
        );
        assert!(EmulatorConfig::from_toml("page_size = 0").is_err());
        assert!(EmulatorConfig::from_toml("nonsense = 1").is_err());
    }

    #[test]
    fn the_eviction_notice_defaults_to_azures_30_seconds_and_is_bounded() {
        assert_eq!(EmulatorConfig::default().eviction_notice_seconds, 30);
        let none = EmulatorConfig::from_toml("eviction_notice_seconds = 0").unwrap();
        assert_eq!(none.eviction_notice_seconds, 0);
        assert!(EmulatorConfig::from_toml("eviction_notice_seconds = 3601").is_err());
    }

    #[test]
    fn the_nic_reservation_defaults_to_azures_180_seconds_and_is_bounded() {
        assert_eq!(EmulatorConfig::default().nic_reservation_seconds, 180);
        let short = EmulatorConfig::from_toml("nic_reservation_seconds = 3").unwrap();
        assert_eq!(short.nic_reservation_seconds, 3);
        let refused = EmulatorConfig::from_toml("nic_reservation_seconds = 100000")
            .unwrap_err()
            .to_string();
        assert!(refused.contains("nic_reservation_seconds"), "{refused}");
    }

    #[test]
    fn the_quota_section_parses_and_is_validated_with_the_field_named() {
        let config = EmulatorConfig::from_toml(
            r#"
            [quota]
            regional_vcpus = 16
            [[quota.restrictions]]
            size = "Standard_D2s_v5"
            location = "westeurope"
            zones = ["2"]
            "#,
        )
        .unwrap();
        assert_eq!(config.quota.regional_vcpus, 16);
        assert_eq!(config.quota.restrictions.len(), 1);
        let refused = EmulatorConfig::from_toml("[quota]\nfamilies = { nope = 1 }")
            .unwrap_err()
            .to_string();
        assert!(
            refused.starts_with("invalid config: [quota] families.nope: unknown size family"),
            "{refused}"
        );
    }

    #[test]
    fn fault_rules_are_validated_with_the_rule_named() {
        let refused = EmulatorConfig::from_toml(
            r#"
            [[faults]]
            kind = "throttle"
            every = 3
            [[faults]]
            kind = "throttle"
            every = 0
            "#,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            refused,
            "invalid config: [[faults]] #2: every must be at least 1"
        );
    }

    #[test]
    fn images_add_versions_and_bad_ones_are_refused_naming_the_entry() {
        let config = EmulatorConfig::from_toml(
            r#"
            [[images]]
            publisher = "Contoso"
            offer = "node"
            sku = "v1"
            versions = ["1.0.0", "1.1.0"]
            "#,
        )
        .unwrap();
        assert_eq!(config.images[0].images().len(), 2);
        assert_eq!(config.images[0].hyper_v_generation, "V2");
        let refused = EmulatorConfig::from_toml(
            r#"
            [[images]]
            publisher = "Contoso"
            offer = "node"
            sku = "v1"
            versions = ["latest"]
            "#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            refused.contains("[[images]] #1: version 'latest'"),
            "{refused}"
        );
    }
}
