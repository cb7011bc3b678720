//! The emulator's in-memory state (resources and operation records), ARM id helpers, paging
//! tokens, JSON body helpers, and persistence to a JSON file (temp file + rename).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::ArmError;

pub mod events;
pub mod images;
pub mod networks;
pub mod operation;
pub mod vaults;

pub use operation::{Action, Links, OpError, OpStatus, Operation};

/// The resource types the emulator serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// `Microsoft.Compute/virtualMachines`.
    Vm,
    /// `Microsoft.Compute/disks`.
    Disk,
    /// `Microsoft.Network/networkInterfaces`.
    Nic,
    /// `Microsoft.Compute/galleries` (an Azure Compute Gallery).
    Gallery,
    /// `Microsoft.Compute/galleries/images` (a gallery image definition).
    GalleryImage,
    /// `Microsoft.Compute/galleries/images/versions` (a gallery image version).
    GalleryImageVersion,
    /// `Microsoft.Network/virtualNetworks` (their subnets inline, see `virtual_networks.rs`).
    VirtualNetwork,
}

impl Kind {
    /// The provider namespace.
    pub fn provider(self) -> &'static str {
        match self {
            Self::Vm | Self::Disk => "Microsoft.Compute",
            Self::Nic | Self::VirtualNetwork => "Microsoft.Network",
            Self::Gallery | Self::GalleryImage | Self::GalleryImageVersion => "Microsoft.Compute",
        }
    }

    /// The ARM resource type.
    pub fn type_name(self) -> &'static str {
        match self {
            Self::Vm => "Microsoft.Compute/virtualMachines",
            Self::Disk => "Microsoft.Compute/disks",
            Self::Nic => "Microsoft.Network/networkInterfaces",
            Self::Gallery => "Microsoft.Compute/galleries",
            Self::GalleryImage => "Microsoft.Compute/galleries/images",
            Self::GalleryImageVersion => "Microsoft.Compute/galleries/images/versions",
            Self::VirtualNetwork => "Microsoft.Network/virtualNetworks",
        }
    }
}

/// A VM's power state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Power {
    /// Being started or created.
    Starting,
    /// Running.
    Running,
    /// Being powered off.
    Stopping,
    /// Powered off, still allocated.
    Stopped,
    /// Being deallocated.
    Deallocating,
    /// Deallocated.
    Deallocated,
}

impl Power {
    /// The lowercase name used in `PowerState/<name>`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
            Self::Deallocating => "deallocating",
            Self::Deallocated => "deallocated",
        }
    }
}

/// One stored resource: its ARM envelope plus what the emulator tracks beside it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Resource {
    /// VM, disk or NIC.
    pub kind: Kind,
    /// The envelope as GET returns it (before per-request decoration).
    pub body: Value,
    /// The id of the operation in progress on it.
    #[serde(default)]
    pub busy: Option<String>,
    /// VMs only: power state.
    #[serde(default)]
    pub power: Option<Power>,
    /// VMs only: when the guest finishes (or finished) booting.
    #[serde(default)]
    pub boot_at: Option<DateTime<Utc>>,
    /// VMs only: whether the boot completion has been announced on the change channel.
    #[serde(default)]
    pub boot_signalled: bool,
    /// The code of the last operation that failed on it (instance view `ProvisioningState/failed/<code>`).
    #[serde(default)]
    pub last_error: Option<String>,
    /// NICs only: the VM Azure holds the NIC for after that VM's create ended `Failed` or
    /// `Canceled`, or after the VM was deleted (see [`Reservation`]).
    #[serde(default)]
    pub reserved: Option<Reservation>,
    /// Virtual networks only: the private IP addresses given out in each subnet (see
    /// [`networks::Allocations`]).
    #[serde(default, skip_serializing_if = "networks::Allocations::is_empty")]
    pub addresses: networks::Allocations,
    /// VMs only: a power state the VM passes to at a set time while its operation runs (a
    /// redeploy's `stopping` turns `starting` halfway); see [`Resource::power_at`].
    #[serde(default)]
    pub power_stage: Option<(DateTime<Utc>, Power)>,
    /// VMs only: when the last operation on it ended (the instance view's provisioning `time`).
    #[serde(default)]
    pub provisioned_at: Option<DateTime<Utc>>,
    /// The message of the last operation that failed on it (with `last_error`).
    #[serde(default)]
    pub last_error_message: Option<String>,
}

/// A NIC held for a VM after its failed or canceled create or its deletion: for the emulator's
/// reservation window from `since`, a NIC DELETE, or a VM PUT that names the NIC for another VM,
/// is refused with 400 `NicReservedForAnotherVm`, as Azure refuses them for 180 s.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// The id of the VM the NIC is held for.
    pub vm: String,
    /// When the hold began.
    pub since: DateTime<Utc>,
}

impl Reservation {
    /// Whether the hold is still in force at `now` with a window of `window`.
    pub fn holds(&self, now: DateTime<Utc>, window: chrono::Duration) -> bool {
        self.since
            .checked_add_signed(window)
            .is_none_or(|end| now < end)
    }
}

impl Resource {
    /// A resource with this envelope, idle.
    pub fn new(kind: Kind, body: Value) -> Self {
        Self {
            kind,
            body,
            busy: None,
            power: None,
            boot_at: None,
            boot_signalled: false,
            last_error: None,
            reserved: None,
            addresses: networks::Allocations::default(),
            power_stage: None,
            provisioned_at: None,
            last_error_message: None,
        }
    }

    /// The VM's power state at `now`: `power`, or the staged one once its time has come.
    pub fn power_at(&self, now: DateTime<Utc>) -> Option<Power> {
        match self.power_stage {
            Some((at, staged)) if at <= now => Some(staged),
            _ => self.power,
        }
    }

    /// The resource id as created.
    pub fn id(&self) -> &str {
        self.body["id"].as_str().unwrap_or_default()
    }

    /// The resource name.
    pub fn name(&self) -> &str {
        self.body["name"].as_str().unwrap_or_default()
    }

    /// The location, `global` when unknown.
    pub fn location(&self) -> &str {
        self.body["location"].as_str().unwrap_or("global")
    }

    /// `properties.provisioningState`.
    pub fn provisioning_state(&self) -> &str {
        self.body["properties"]["provisioningState"]
            .as_str()
            .unwrap_or("Succeeded")
    }

    /// Sets `properties.provisioningState` and a fresh etag.
    pub fn set_provisioning_state(&mut self, state: &str) {
        props(&mut self.body).insert("provisioningState".into(), Value::from(state));
        self.new_etag();
    }

    /// Gives the resource a fresh etag.
    pub fn new_etag(&mut self) {
        if let Some(obj) = self.body.as_object_mut() {
            obj.insert(
                "etag".into(),
                Value::from(format!("\"{}\"", uuid::Uuid::new_v4())),
            );
        }
    }

    /// The current etag.
    pub fn etag(&self) -> &str {
        self.body["etag"].as_str().unwrap_or_default()
    }

    /// 409 `AnotherOperationInProgress` while an operation runs on it.
    pub fn ensure_idle(&self) -> Result<(), ArmError> {
        match self.busy {
            Some(_) => Err(ArmError::Busy(self.id().to_owned())),
            None => Ok(()),
        }
    }
}

/// Everything the emulator stores, keyed by lower-cased resource id and operation id.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    /// Resources by lower-cased id.
    pub resources: BTreeMap<String, Resource>,
    /// Operation records by id.
    pub operations: BTreeMap<String, Operation>,
    /// Keys of the VMs whose boot may still have to be announced, so that the emulator does not
    /// scan every resource for them on every request: every VM with a `boot_at` and no
    /// `boot_signalled` is in it (it may hold keys that no longer need it; they are dropped when
    /// checked). Derived from `resources`: not persisted, rebuilt on load.
    #[serde(skip)]
    pub pending_boots: BTreeSet<String>,
    /// Ids of the operations in progress, so that the emulator does not scan every operation
    /// record (finished ones are kept for an hour) on every request: every operation in
    /// progress is in it (it may hold ids of finished ones; they are dropped when checked).
    /// Derived from `operations`: not persisted, rebuilt on load.
    #[serde(skip)]
    pub in_progress: BTreeSet<String>,
    /// Key Vault secrets, by vault (see `key_vault.rs`).
    #[serde(default)]
    pub vaults: vaults::Vaults,
    /// The marketplace image catalog (see `images.rs`).
    #[serde(default)]
    pub images: images::Catalog,
    /// Scheduled Events and the VMs' document incarnations (see `scheduled_events.rs`).
    #[serde(default)]
    pub scheduled_events: events::Events,
}

impl State {
    /// The resource with this id (any casing).
    pub fn get(&self, id: &str) -> Option<&Resource> {
        self.resources.get(&key(id))
    }

    /// The resource with this id (any casing), mutably.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut Resource> {
        self.resources.get_mut(&key(id))
    }

    /// Loads the state file; a missing file is an empty state.
    pub fn load(path: &Path) -> Result<Self, std::io::Error> {
        let mut state: Self = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(std::io::Error::other)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::default(),
            Err(e) => return Err(e),
        };
        state.pending_boots = state
            .resources
            .iter()
            .filter(|(_, r)| r.kind == Kind::Vm && !r.boot_signalled && r.boot_at.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        state.in_progress = state
            .operations
            .values()
            .filter(|o| o.status == OpStatus::InProgress)
            .map(|o| o.id.clone())
            .collect();
        Ok(state)
    }

    /// Writes the state file atomically (a temp file beside it, then rename); returns its size
    /// in bytes.
    pub fn save(&self, path: &Path) -> Result<usize, std::io::Error> {
        let bytes = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        std::fs::write(&tmp, &bytes)?;
        std::fs::rename(&tmp, path)?;
        Ok(bytes.len())
    }
}

/// The map key of a resource id: lower-cased, without a trailing slash.
pub fn key(id: &str) -> String {
    id.trim_end_matches('/').to_ascii_lowercase()
}

/// The id of a resource.
pub fn resource_id(sub: &str, rg: &str, kind: Kind, name: &str) -> String {
    format!(
        "/subscriptions/{sub}/resourceGroups/{rg}/providers/{}/{name}",
        kind.type_name()
    )
}

/// The location a create request names, or ARM's 400 when it is missing or empty.
pub fn required_location(request: &Value) -> Result<String, ArmError> {
    request["location"]
        .as_str()
        .filter(|location| !location.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| ArmError::invalid("location", "The 'location' property is required."))
}

/// Writes the server-owned envelope of a resource body: `id`, `name`, `type` and `location`, and
/// empty `tags` when the request gave none.
pub fn stamp_envelope(body: &mut Value, kind: Kind, id: &str, name: &str, location: &str) {
    body["id"] = Value::from(id);
    body["name"] = Value::from(name);
    body["type"] = Value::from(kind.type_name());
    body["location"] = Value::from(location);
    if body.get("tags").is_none() {
        body["tags"] = Value::Object(Map::new());
    }
}

/// The last segment of an id.
pub fn name_of(id: &str) -> &str {
    id.trim_end_matches('/').rsplit('/').next().unwrap_or(id)
}

/// The `$skiptoken` that resumes a listing after `last_key`.
pub fn page_token(last_key: &str) -> String {
    URL_SAFE_NO_PAD.encode(last_key)
}

/// The key a `$skiptoken` resumes after; `None` for a token the emulator did not issue.
pub fn parse_page_token(token: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
    String::from_utf8(bytes).ok()
}

/// One page of the resources of `kind` in a resource group, after `after` (a key), and the key
/// to resume from when more remain.
#[cfg(test)]
pub fn page<'a>(
    state: &'a State,
    collection: &Collection,
    after: Option<&str>,
    size: usize,
) -> (Vec<&'a Resource>, Option<String>) {
    page_where(state, collection, after, size, |_| true)
}

/// [`page`] of the members `keep` accepts (a list's `$filter`).
pub fn page_where<'a>(
    state: &'a State,
    collection: &Collection,
    after: Option<&str>,
    size: usize,
    keep: impl Fn(&Resource) -> bool,
) -> (Vec<&'a Resource>, Option<String>) {
    let prefix = collection.prefix();
    let mut items = state
        .resources
        .range(after.unwrap_or(&prefix).to_owned()..)
        .filter(|(k, _)| Some(k.as_str()) != after)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .filter(|(k, _)| collection.holds(&k[prefix.len()..]))
        .filter(|(_, r)| keep(r));
    let page: Vec<(&String, &Resource)> = items.by_ref().take(size.max(1)).collect();
    let more = items.next().is_some();
    let next = if more {
        page.last().map(|(k, _)| (*k).clone())
    } else {
        None
    };
    (page.into_iter().map(|(_, r)| r).collect(), next)
}

/// The resources a list names, by their keys ([`key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Collection {
    /// One resource group's of one type: the key of
    /// `/subscriptions/{sub}/resourceGroups/{rg}/providers/{namespace}/{type}`.
    Group(String),
    /// One type's in every resource group of a subscription (ARM's subscription-level list).
    Subscription {
        /// The subscription.
        sub: String,
        /// `{namespace}/{type}`, e.g. `Microsoft.Compute/virtualMachines`.
        type_name: String,
    },
}

impl Collection {
    /// The key prefix every member's key starts with.
    fn prefix(&self) -> String {
        match self {
            Collection::Group(collection) => format!("{collection}/"),
            Collection::Subscription { sub, .. } => {
                key(&format!("/subscriptions/{sub}/resourceGroups/")) + "/"
            }
        }
    }

    /// Whether the key whose part after [`Self::prefix`] is `rest` is a member.
    fn holds(&self, rest: &str) -> bool {
        match self {
            Collection::Group(_) => !rest.contains('/'),
            Collection::Subscription { type_name, .. } => {
                let type_path = format!("/providers/{}/", type_name.to_ascii_lowercase());
                rest.split_once('/').is_some_and(|(_, tail)| {
                    let tail = format!("/{tail}");
                    tail.strip_prefix(&type_path)
                        .is_some_and(|name| !name.is_empty() && !name.contains('/'))
                })
            }
        }
    }
}

/// `body["properties"]` as a mutable object, created when absent.
pub fn props(body: &mut Value) -> &mut Map<String, Value> {
    obj_at(body, "properties")
}

/// `value[field]` as a mutable object, created (or replaced, if not an object) when needed.
pub fn obj_at<'a>(value: &'a mut Value, field: &str) -> &'a mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    let slot = &mut value[field];
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(map) => map,
        _ => unreachable!("just made an object"),
    }
}

/// Removes `null` members recursively: read-only fields a client sends as `null` are ignored.
pub fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// The body a write asks for: `old` with `request` merged in for a PATCH, `request` as it is for
/// a PUT.
pub fn written_body(old: &Value, request: &Value, patch: bool) -> Value {
    if patch {
        let mut body = old.clone();
        merge(&mut body, request.clone());
        body
    } else {
        request.clone()
    }
}

/// Merges `patch` into `target` (objects recursively; anything else replaces).
pub fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p,
    }
}

/// `duration` after `start`, saturating instead of panicking at the end of chrono's range.
pub fn after(start: DateTime<Utc>, duration: std::time::Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(duration)
        .ok()
        .and_then(|delta| start.checked_add_signed(delta))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// The current time as ARM writes it.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state_with(n: usize) -> State {
        let mut state = State::default();
        for i in 0..n {
            let id = resource_id("s", "rg", Kind::Vm, &format!("vm-{i:03}"));
            state
                .resources
                .insert(key(&id), Resource::new(Kind::Vm, json!({ "id": id })));
        }
        let other = resource_id("s", "rg2", Kind::Vm, "x");
        state
            .resources
            .insert(key(&other), Resource::new(Kind::Vm, json!({ "id": other })));
        state
    }

    #[test]
    fn a_subscription_level_list_pages_through_every_resource_group_and_only_its_type() {
        let mut state = state_with(60);
        let disk = resource_id("s", "rg2", Kind::Disk, "d");
        state
            .resources
            .insert(key(&disk), Resource::new(Kind::Disk, json!({ "id": disk })));
        let elsewhere = resource_id("t", "rg", Kind::Vm, "y");
        state.resources.insert(
            key(&elsewhere),
            Resource::new(Kind::Vm, json!({ "id": elsewhere })),
        );
        let collection = Collection::Subscription {
            sub: "S".to_owned(),
            type_name: Kind::Vm.type_name().to_owned(),
        };
        let mut after: Option<String> = None;
        let mut seen = Vec::new();
        loop {
            let (items, next) = page(&state, &collection, after.as_deref(), 25);
            seen.extend(items.iter().map(|r| r.id().to_owned()));
            match next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        // 60 in rg and one in rg2; not the disk, not subscription t's VM.
        assert_eq!(seen.len(), 61, "{seen:?}");
        assert!(seen.iter().any(|id| id.contains("/rg2/")));
        assert!(
            seen.iter()
                .all(|id| id.contains("virtualMachines") && id.starts_with("/subscriptions/s/"))
        );
    }

    #[test]
    fn paging_returns_every_resource_of_the_group_once() {
        let state = state_with(120);
        let collection =
            key("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines");
        let mut after: Option<String> = None;
        let mut seen = Vec::new();
        let mut pages = 0;
        loop {
            let token = after.as_deref().map(page_token);
            let resume = token.as_deref().and_then(parse_page_token);
            let (items, next) = page(
                &state,
                &Collection::Group(collection.clone()),
                resume.as_deref(),
                50,
            );
            pages += 1;
            seen.extend(items.iter().map(|r| r.id().to_owned()));
            match next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        assert_eq!(pages, 3);
        assert_eq!(seen.len(), 120);
        seen.dedup();
        assert_eq!(seen.len(), 120);
    }

    #[test]
    fn paging_tokens_round_trip_and_reject_garbage() {
        let k = "/subscriptions/s/resourcegroups/rg/x";
        assert_eq!(parse_page_token(&page_token(k)).as_deref(), Some(k));
        assert_eq!(parse_page_token("%%%"), None);
    }

    #[test]
    fn nulls_are_stripped_and_merges_are_deep() {
        let mut v = json!({"a": null, "b": {"c": null, "d": 1}, "e": [{"f": null}]});
        strip_nulls(&mut v);
        assert_eq!(v, json!({"b": {"d": 1}, "e": [{}]}));
        merge(&mut v, json!({"b": {"g": 2}, "e": []}));
        assert_eq!(v, json!({"b": {"d": 1, "g": 2}, "e": []}));
    }
}
