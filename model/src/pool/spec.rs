//! The Pool file as written by people: `apiVersion: nodewright.io/v1alpha1`, `kind: Pool`.
//!
//! Every field is kept as written (durations and percentages as strings) so that one validation
//! pass ([`super::validate()`]) can name each bad field and its fix, instead of the parser stopping
//! at the first. Unknown fields are refused by the parser, with their name.
//!
//! Serializing skips unset options and empty lists and maps, so adding an optional field to
//! [`MachineTemplate`] later keeps every existing template hash (see [`super::template_hash`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The only `apiVersion` this release reads.
pub const API_VERSION: &str = "nodewright.io/v1alpha1";
/// The `kind` of a pool file.
pub const KIND: &str = "Pool";

/// A pool file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pool {
    /// Must be [`API_VERSION`].
    pub api_version: String,
    /// Must be [`KIND`].
    pub kind: String,
    /// The pool's name.
    pub metadata: PoolMetadata,
    /// What the pool's machines look like and how they are replaced.
    pub spec: PoolSpec,
}

/// `metadata` of a pool file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolMetadata {
    /// The pool's name: a prefix of every machine name (`<pool>-<5 characters>`).
    pub name: String,
}

/// `spec` of a pool file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolSpec {
    /// How many machines the pool should have.
    pub replicas: u32,
    /// The machine template.
    pub template: MachineTemplate,
    /// How a rolling update replaces machines.
    #[serde(default)]
    pub strategy: Strategy,
    /// How nodes are drained before their machine is deleted.
    #[serde(default)]
    pub drain: DrainSettings,
    /// How long machines may take.
    #[serde(default)]
    pub timeouts: Timeouts,
    /// When a machine is unhealthy and how a pool controller remediates it; unset: the defaults
    /// of [`HealthSpec`] (see [`crate::controller::HealthPolicy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthSpec>,
    /// Seconds a new machine's Node must have been Ready before the machine counts available
    /// (a Deployment's field at spec level); unset: `spec.strategy.minReadySeconds`. Set only
    /// one of the two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ready_seconds: Option<u32>,
    /// What a batch of creates keeps free in the subnet and the vCPU quotas; unset: nothing
    /// (see [`HeadroomSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<HeadroomSpec>,
    /// When nodewright may disrupt the pool's machines (recurring windows on a time zone);
    /// unset: any time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<crate::maintenance::MaintenanceSpec>,
    /// What a pool controller does when a newer version of the image appears (for an image
    /// written without a concrete version); unset: `notify`, checked hourly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_update: Option<ImageUpdateSpec>,
    /// How long an offering (size, zone, capacity type) Azure refused for capacity is set
    /// aside; unset: an hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offerings: Option<OfferingsSpec>,
    /// What nodewright does about Azure's Scheduled Events of Reboot and Freeze, and how long
    /// before `NotBefore` a drain must end; unset: the defaults of
    /// [`crate::scheduled_events::ScheduledEventsPolicy`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_events: Option<crate::scheduled_events::ScheduledEventsSpec>,
}

/// `spec.offerings`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OfferingsSpec {
    /// How long a refused offering is set aside (default `1h`, from `10s` to `24h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_for: Option<String>,
}

/// `spec.imageUpdate`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageUpdateSpec {
    /// `auto` (roll to a newer version inside the maintenance windows), `notify` (the default:
    /// status and an Event say a newer version exists) or `pinned` (neither).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<crate::image::ImageUpdatePolicy>,
    /// How often the image's versions are listed (default `1h`, from `10s` to `7d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_interval: Option<String>,
}

/// `spec.headroom`: before each batch of creates nodewright reads the subnet's free addresses
/// and the vCPU quotas and cuts the batch to what fits; this keeps some of both free.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeadroomSpec {
    /// What is never taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<HeadroomBufferSpec>,
}

/// `spec.headroom.buffer`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeadroomBufferSpec {
    /// Subnet addresses kept free (for other users of the subnet); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<u32>,
    /// vCPUs kept free in every quota that applies; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpus: Option<u32>,
}

/// `spec.health`: when a machine is unhealthy and what a pool controller does about it. Every
/// key is optional; an unset key takes its default (listed on each field).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthSpec {
    /// Node conditions that make a machine unhealthy once they held for their timeout (default:
    /// `Ready=False` 5m, `Ready=Unknown` 5m, `KernelDeadlock=True` 0s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy_conditions: Option<Vec<UnhealthyConditionSpec>>,
    /// Above this many unhealthy machines (a count, or a percentage of the pool rounded down)
    /// nothing is remediated (default `40%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unhealthy: Option<IntOrPercent>,
    /// Remediations at once (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u32>,
    /// A Node whose Lease in `kube-node-lease` was not renewed for this long is unhealthy
    /// (default: the Lease is not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_timeout: Option<String>,
    /// The ladder of remediations, tried in order: `restart`, `redeploy` and `replace`, each at
    /// most once and in that order (default `[replace]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<Vec<String>>,
    /// How long each rung (`restart`, `redeploy`) gets to bring a machine back before the next
    /// (default `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation_timeout: Option<String>,
}

/// One entry of `spec.health.unhealthyConditions`: a Node condition and how long it must hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UnhealthyConditionSpec {
    /// The condition's type, e.g. `Ready` or `KernelDeadlock`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown` (YAML's unquoted true and false are read as `True` and
    /// `False`).
    #[serde(deserialize_with = "condition_status")]
    pub status: String,
    /// How long the condition must hold, e.g. `5m` (`0s`: at once).
    pub timeout: String,
}

/// Reads a condition status written as a string, or as a YAML boolean (`status: False`).
fn condition_status<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    deserializer.deserialize_any(ConditionStatusVisitor)
}

/// Reads a string or a boolean; its `expecting` text is what a user sees for anything else.
struct ConditionStatusVisitor;

impl serde::de::Visitor<'_> for ConditionStatusVisitor {
    type Value = String;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a condition status: \"True\", \"False\" or \"Unknown\"")
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<Self::Value, E> {
        Ok(if value { "True" } else { "False" }.to_owned())
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(value.to_owned())
    }
}

/// What every machine of the pool is built from. Its hash is the machine's template version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineTemplate {
    /// Azure VM size, e.g. `Standard_D4s_v5`.
    pub vm_size: String,
    /// The OS image.
    pub image: ImageSource,
    /// The OS disk.
    #[serde(default)]
    pub os_disk: OsDiskSpec,
    /// ARM id of the subnet the NIC joins.
    pub subnet_id: String,
    /// Availability zones to spread machines over (`"1"`, `"2"`, `"3"`); empty for none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// Labels the Node gets (besides nodewright's own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Taints the Node gets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<TaintSpec>,
    /// Azure tags the VM, NIC and OS disk get (besides nodewright's ownership tags).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The VM's admin user.
    #[serde(default = "default_admin_username")]
    pub admin_username: String,
    /// An SSH public key for the admin user (OpenSSH format); none disables SSH keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_public_key: Option<String>,
    /// What the machine runs on first boot to join the cluster (cloud-init or a script), as text;
    /// nodewright base64-encodes it into the VM's customData. It travels with the pool through
    /// every run's input: a text holding a credential belongs in [`Self::bootstrap_secret_ref`]
    /// or [`Self::bootstrap_key_vault_secret`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<String>,
    /// The bootstrap by reference (instead of `bootstrap`): a key of a Kubernetes Secret that
    /// the worker reads when it builds the VM. The text never enters a run's input, result,
    /// failure, log or the CLI's output; only the reference does, and the template hash covers
    /// the reference, not the Secret's content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_secret_ref: Option<BootstrapSecretRef>,
    /// The bootstrap by reference to an Azure Key Vault secret (instead of `bootstrap` or
    /// `bootstrapSecretRef`), read with the worker's Azure identity when it builds the VM. As
    /// for a Secret, only the URI enters a run, and the template hash covers the URI: a
    /// versionless URI reads the latest version at each create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_key_vault_secret: Option<BootstrapKeyVaultSecret>,
    /// A join token minted per machine (opt-in): the worker creates a Kubernetes bootstrap token
    /// for each machine when it builds the VM, puts it into the bootstrap text where it says
    /// [`crate::bootstrap_token::PLACEHOLDER`], and deletes it once the Node is Ready or the
    /// create is undone. The token never enters a run; the template hash covers these settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_token: Option<BootstrapTokenSpec>,
    /// The capacity types the machines may be, in order of preference: `on-demand` (the
    /// default), `spot`, or both (`[spot, on-demand]`: Spot where Azure has room, else
    /// on-demand). See [`super::capacity_type`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_types: Vec<super::capacity_type::CapacityType>,
    /// The Spot machines' settings: maximum price, eviction policy, AKS's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spot: Option<super::capacity_type::SpotSpec>,
}

/// An Azure Key Vault secret holding a machine's bootstrap text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BootstrapKeyVaultSecret {
    /// The secret's identifier, `https://<vault>.vault.azure.net/secrets/<name>[/<version>]`
    /// (see [`crate::keyvault::SecretUri`]); without a version, the latest.
    pub secret_uri: String,
}

impl std::fmt::Display for BootstrapKeyVaultSecret {
    /// `Key Vault secret https://contoso-boot.vault.azure.net/secrets/workers-bootstrap`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key Vault secret {}", self.secret_uri)
    }
}

/// `spec.template.bootstrapToken`: how the join token minted for each machine looks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BootstrapTokenSpec {
    /// How long the token is valid after it is minted (default `30m`; from
    /// [`crate::limits::MIN_BOOTSTRAP_TOKEN_TTL`] to [`crate::limits::MAX_BOOTSTRAP_TOKEN_TTL`],
    /// and at least the pool's creation timeout).
    #[serde(default = "default_token_ttl")]
    pub ttl: String,
    /// Groups the token authenticates as besides `system:bootstrappers`, each
    /// `system:bootstrappers:<name>` (e.g. `system:bootstrappers:kubeadm:default-node-token`,
    /// the group kubeadm binds to the node-bootstrapper roles).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_groups: Vec<String>,
}

fn default_token_ttl() -> String {
    "30m".to_owned()
}

impl Default for BootstrapTokenSpec {
    fn default() -> Self {
        Self {
            ttl: default_token_ttl(),
            extra_groups: Vec::new(),
        }
    }
}

impl BootstrapTokenSpec {
    /// The TTL as a duration; `None` when it does not parse (validation refuses such a pool).
    pub fn ttl(&self) -> Option<std::time::Duration> {
        humantime::parse_duration(&self.ttl).ok()
    }
}

/// A key of a Kubernetes Secret holding a machine's bootstrap text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BootstrapSecretRef {
    /// The Secret's namespace (the worker needs `get` on Secrets there).
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// The key in the Secret's data (default `bootstrap`).
    #[serde(default = "default_bootstrap_key")]
    pub key: String,
}

/// The key a [`BootstrapSecretRef`] reads unless it names another.
pub const DEFAULT_BOOTSTRAP_KEY: &str = "bootstrap";

fn default_bootstrap_key() -> String {
    DEFAULT_BOOTSTRAP_KEY.to_owned()
}

impl std::fmt::Display for BootstrapSecretRef {
    /// `Secret nodewright/workers-bootstrap, key bootstrap`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Secret {}/{}, key {}",
            self.namespace, self.name, self.key
        )
    }
}

fn default_admin_username() -> String {
    "nodewright".to_owned()
}

/// Where the OS image comes from: exactly one of `id` (a gallery image version or managed image)
/// or the marketplace reference (`publisher`, `offer`, `sku`, `version`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageSource {
    /// ARM id of a Compute Gallery image version (or managed image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Marketplace publisher, e.g. `Canonical`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// Marketplace offer, e.g. `ubuntu-24_04-lts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<String>,
    /// Marketplace SKU, e.g. `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
    /// Marketplace version, e.g. `latest` or `24.04.202411030`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The OS disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OsDiskSpec {
    /// Size in GiB; none keeps the image's size.
    #[serde(default, rename = "sizeGB", skip_serializing_if = "Option::is_none")]
    pub size_gb: Option<u32>,
    /// `Premium_LRS` (default), `StandardSSD_LRS`, `Standard_LRS`, `Premium_ZRS` or
    /// `StandardSSD_ZRS` (Azure refuses `PremiumV2_LRS` and `UltraSSD_LRS` for OS disks).
    #[serde(default = "default_storage_account_type")]
    pub storage_account_type: String,
}

fn default_storage_account_type() -> String {
    "Premium_LRS".to_owned()
}

impl Default for OsDiskSpec {
    fn default() -> Self {
        Self {
            size_gb: None,
            storage_account_type: default_storage_account_type(),
        }
    }
}

/// A Node taint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaintSpec {
    /// The taint key (a label key).
    pub key: String,
    /// The value (a label value); may be empty.
    #[serde(default)]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// A count or a percentage (`"25%"`), as in a Deployment's rolling-update strategy.
///
/// Kept as written (a negative count or `"120%"` still parses) so that validation can name the
/// field; anything other than an integer or a string is refused by the parser with an example.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum IntOrPercent {
    /// An absolute number of machines.
    Count(i64),
    /// A percentage of `replicas`, written `"<n>%"` (or a number in quotes).
    Text(String),
}

impl<'de> Deserialize<'de> for IntOrPercent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IntOrPercentVisitor)
    }
}

/// Reads an integer or a string; its `expecting` text is what a user sees for anything else.
struct IntOrPercentVisitor;

impl serde::de::Visitor<'_> for IntOrPercentVisitor {
    type Value = IntOrPercent;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a number of machines (e.g. 1) or a percentage (e.g. \"25%\")")
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Ok(IntOrPercent::Count(value))
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Self::Value, E> {
        i64::try_from(value)
            .map(IntOrPercent::Count)
            .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(value), &self))
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(IntOrPercent::Text(value.to_owned()))
    }
}

/// How a rolling update replaces machines (Kubernetes Deployment semantics).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Strategy {
    /// Machines above `replicas` allowed during a rollout (default 1).
    #[serde(default = "default_max_surge")]
    pub max_surge: IntOrPercent,
    /// Machines below `replicas` allowed during a rollout (default 0).
    #[serde(default = "default_max_unavailable")]
    pub max_unavailable: IntOrPercent,
    /// Failed machine creations or deletions after which a rollout pauses itself (default 3).
    #[serde(default = "default_max_failures")]
    pub max_failures: u32,
    /// A rollout that makes no progress for this long is marked stalled (default `30m`).
    #[serde(default = "default_progress_deadline")]
    pub progress_deadline: String,
    /// Seconds a new machine's Node must have been Ready before the machine counts available
    /// (Deployment's `minReadySeconds`; default 0: available as soon as its Node is Ready).
    #[serde(default)]
    pub min_ready_seconds: u32,
    /// After each batch of new machines (the canary first) is available, how long it must stay
    /// healthy before the rollout goes on (e.g. `10m`; unset: no soak). A new machine that
    /// turns NotReady meanwhile pauses the rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<String>,
}

fn default_max_surge() -> IntOrPercent {
    IntOrPercent::Count(1)
}
fn default_max_unavailable() -> IntOrPercent {
    IntOrPercent::Count(0)
}
fn default_max_failures() -> u32 {
    3
}
fn default_progress_deadline() -> String {
    "30m".to_owned()
}

impl Default for Strategy {
    fn default() -> Self {
        Self {
            max_surge: default_max_surge(),
            max_unavailable: default_max_unavailable(),
            max_failures: default_max_failures(),
            progress_deadline: default_progress_deadline(),
            min_ready_seconds: 0,
            soak: None,
        }
    }
}

/// How nodes are drained (machine-controller-manager's defaults).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DrainSettings {
    /// After this long the drain switches to force mode (default `2h`).
    #[serde(default = "default_drain_timeout")]
    pub timeout: String,
    /// How often an eviction blocked by a PodDisruptionBudget is retried (default `20s`).
    #[serde(default = "default_pdb_retry_interval")]
    pub pdb_retry_interval: String,
    /// How long to wait for a pod's volumes to detach, on top of its grace period (default `2m`).
    #[serde(default = "default_volume_detach_timeout")]
    pub volume_detach_timeout: String,
    /// How long to wait for a moved volume to attach on its new node (default `90s`).
    #[serde(default = "default_volume_attach_timeout")]
    pub volume_attach_timeout: String,
    /// A node NotReady (or with a read-only filesystem) this long is drained in force mode
    /// (default `5m`).
    #[serde(default = "default_force_after_unhealthy")]
    pub force_after_unhealthy: String,
    /// What a drain does with pods whose eviction loses data (`emptyDir` volumes, or no
    /// controller): `evict` (named in the drain's `localDataLost`) or `refuse` (the drain stops
    /// before its first eviction). Unset: `refuse` for a maintenance drain, `evict` for a
    /// deletion (see `model::drain::local_data` for why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_data: Option<String>,
    /// Drain rules (Cluster API's MachineDrainRule): per pod selector, `Drain` (default),
    /// `Skip` or `WaitCompleted`, and an `order` (lower first); the first matching rule wins
    /// (see `model::drain::rules`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<crate::drain::DrainRuleSpec>,
    /// The drain's hard deadline, counted from its start (Karpenter's NodePool field): force
    /// mode comes then at the latest, whatever extends the deadline; pods are evicted with their
    /// grace period cut to the time left; and once it has passed, pods marked do-not-disrupt
    /// are deleted too, each named. Unset (the default): the drain's `timeout` is its hard
    /// deadline, and a rollout leaves a machine with marked pods alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
}

fn default_drain_timeout() -> String {
    "2h".to_owned()
}
fn default_pdb_retry_interval() -> String {
    "20s".to_owned()
}
fn default_volume_detach_timeout() -> String {
    "2m".to_owned()
}
fn default_volume_attach_timeout() -> String {
    "90s".to_owned()
}
fn default_force_after_unhealthy() -> String {
    "5m".to_owned()
}

impl Default for DrainSettings {
    fn default() -> Self {
        Self {
            timeout: default_drain_timeout(),
            pdb_retry_interval: default_pdb_retry_interval(),
            volume_detach_timeout: default_volume_detach_timeout(),
            volume_attach_timeout: default_volume_attach_timeout(),
            force_after_unhealthy: default_force_after_unhealthy(),
            local_data: None,
            rules: Vec::new(),
            termination_grace_period: None,
        }
    }
}

/// How long machines may take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timeouts {
    /// From the start of a create until the Node is Ready (default `20m`); past it the machine
    /// is deleted again and the create fails.
    #[serde(default = "default_creation_timeout")]
    pub creation: String,
    /// A Node NotReady this long is unhealthy (default `10m`).
    #[serde(default = "default_health_timeout")]
    pub health: String,
}

fn default_creation_timeout() -> String {
    "20m".to_owned()
}
fn default_health_timeout() -> String {
    "10m".to_owned()
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            creation: default_creation_timeout(),
            health: default_health_timeout(),
        }
    }
}
