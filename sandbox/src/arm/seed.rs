//! Test fixtures: VMs, NICs and disks written straight into the state, in steady state
//! (`provisioningState: Succeeded`), as if they had existed for a while (`POST /sandbox/seed`),
//! and removed again by name prefix (`DELETE /sandbox/seed?prefix=`). No operation is started
//! either way, and no other resource changes.
//!
//! A seeded resource is exactly what GET and list return for one of its kind that exists (the
//! same envelope: `id`, `name`, `type`, `location`, `tags`, `etag`, `properties`), so every ARM
//! route (GET, list, PUT, PATCH, DELETE with its operation) works on it unchanged:
//!
//! - **vm**: `Standard_D2s_v5`, `osProfile.computerName` = its name, a `storageProfile` without
//!   an OS disk and with no data disks, no NICs. Its power state is `running` but its guest never
//!   booted (no boot time): the node joiner registers Nodes for booted guests only, so a seeded VM
//!   never joins the cluster (unless it is deallocated and started through ARM). Deleting it
//!   cascades to nothing.
//! - **nic**: one dynamic IP configuration; with `attachedTo`, `properties.virtualMachine.id` is
//!   that VM's id (the VM need not exist; ARM then refuses to delete the NIC, as for any NIC in
//!   use).
//! - **disk**: an empty `Standard_LRS` disk of `diskSizeGB` (default 32), `Unattached`, or
//!   `Attached` with `managedBy` = the VM's id with `attachedTo` (the VM's body does not list it).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use super::engine::Core;

/// The tag nodewright names a resource's machine with (`machineTag` of a generator).
const MACHINE_TAG: &str = "nodewright.io-machine";
use super::error::ArmError;
use super::state::{Kind, Power, Resource, key, resource_id, timestamp};

/// The most resources one `generate` entry may create.
pub const MAX_GENERATE_COUNT: u64 = 100_000;
/// The subscription resources are seeded into when the request names none (the local stack's).
pub const DEFAULT_SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";
/// The resource group resources are seeded into when the request names none (the local stack's).
pub const DEFAULT_RESOURCE_GROUP: &str = "nodewright-local";
/// The location of seeded resources when the request names none: the emulator has no location
/// of its own (ARM resources take the one their create request names).
pub const DEFAULT_LOCATION: &str = "westeurope";
/// The size of every seeded VM.
pub const SEEDED_VM_SIZE: &str = "Standard_D2s_v5";
/// The size of a seeded disk when the request gives none.
pub const DEFAULT_DISK_SIZE_GB: u64 = 32;
/// The longest resource name accepted.
const MAX_NAME_LEN: usize = 80;
/// Digits of the index in generated names.
const INDEX_DIGITS: usize = 5;

/// The body of `POST /sandbox/seed`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SeedRequest {
    subscription_id: Option<String>,
    resource_group: Option<String>,
    location: Option<String>,
    #[serde(default)]
    resources: Vec<SeedItem>,
    #[serde(default)]
    generate: Vec<Generator>,
}

/// One resource named in full.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SeedItem {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: Option<String>,
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
    attached_to: Option<String>,
    #[serde(rename = "diskSizeGB")]
    disk_size_gb: Option<u64>,
}

/// `count` resources named `<prefix><index, 5 digits><suffix>`; with `machineTag`, each tagged
/// `nodewright.io-machine` = `<prefix><index>` (its own machine, as nodewright tags a machine's
/// NIC `<machine>-nic` and OS disk `<machine>-osdisk`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Generator {
    #[serde(rename = "type")]
    kind: Option<String>,
    prefix: Option<String>,
    #[serde(default)]
    suffix: Option<String>,
    #[serde(default)]
    machine_tag: bool,
    count: Option<u64>,
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
    attached_to: Option<String>,
    #[serde(rename = "diskSizeGB")]
    disk_size_gb: Option<u64>,
}

/// Where seeded resources go.
struct Scope {
    subscription: String,
    resource_group: String,
    location: String,
}

/// What a seeded resource of one entry looks like, apart from its name.
struct Shape {
    kind: Kind,
    tags: Value,
    /// The id of the VM a NIC or disk is attached to.
    attached_to: Option<String>,
    disk_size_gb: u64,
}

/// A validated request: every resource to write, in request order (a later one of the same name
/// wins).
pub struct SeedPlan {
    scope: Scope,
    shapes: Vec<Shape>,
    /// (index into `shapes`, name).
    /// (shape, name, the `nodewright.io-machine` tag of this item when its generator sets one).
    items: Vec<(usize, String, Option<String>)>,
}

impl SeedRequest {
    /// Validates the request; an invalid field is a 400 `InvalidParameter` naming it, e.g.
    /// `generate[0].count`.
    pub fn plan(self) -> Result<SeedPlan, ArmError> {
        let scope = Scope {
            subscription: scope_part(self.subscription_id, "subscriptionId", DEFAULT_SUBSCRIPTION)?,
            resource_group: scope_part(
                self.resource_group,
                "resourceGroup",
                DEFAULT_RESOURCE_GROUP,
            )?,
            location: scope_part(self.location, "location", DEFAULT_LOCATION)?,
        };
        let mut shapes = Vec::new();
        let mut items = Vec::new();
        for (i, item) in self.resources.into_iter().enumerate() {
            let field = format!("resources[{i}]");
            let name = item.name.unwrap_or_default();
            check_name(&name, &format!("{field}.name"), 0)?;
            shapes.push(shape(
                &scope,
                &field,
                item.kind,
                item.tags,
                item.attached_to,
                item.disk_size_gb,
            )?);
            items.push((shapes.len() - 1, name, None));
        }
        for (i, generator) in self.generate.into_iter().enumerate() {
            let field = format!("generate[{i}]");
            let prefix = generator.prefix.unwrap_or_default();
            let suffix = generator.suffix.unwrap_or_default();
            check_name(
                &prefix,
                &format!("{field}.prefix"),
                INDEX_DIGITS + suffix.len(),
            )?;
            let count = generator
                .count
                .ok_or_else(|| ArmError::invalid(&format!("{field}.count"), "count is required"))?;
            if count > MAX_GENERATE_COUNT {
                return Err(ArmError::invalid(
                    &format!("{field}.count"),
                    format!("count must be at most {MAX_GENERATE_COUNT}, not {count}"),
                ));
            }
            shapes.push(shape(
                &scope,
                &field,
                generator.kind,
                generator.tags,
                generator.attached_to,
                generator.disk_size_gb,
            )?);
            let index = shapes.len() - 1;
            // Zero-padded to INDEX_DIGITS (5) digits: 00000 to 99999 with MAX_GENERATE_COUNT.
            let machine_tag = generator.machine_tag;
            items.extend((0..count).map(|n| {
                let machine = format!("{prefix}{n:05}");
                (
                    index,
                    format!("{machine}{suffix}"),
                    machine_tag.then_some(machine),
                )
            }));
        }
        Ok(SeedPlan {
            scope,
            shapes,
            items,
        })
    }
}

fn scope_part(value: Option<String>, field: &str, default: &str) -> Result<String, ArmError> {
    match value {
        None => Ok(default.to_owned()),
        Some(v) if v.is_empty() || v.contains(['/', '?', '#']) => Err(ArmError::invalid(
            field,
            format!("{field} must be non-empty, without '/', '?' or '#'"),
        )),
        Some(v) => Ok(v),
    }
}

/// Refuses a name (or, with `reserve` > 0, a prefix that `reserve` more characters follow) that
/// is empty, too long, or has characters an ARM path cannot carry.
fn check_name(name: &str, field: &str, reserve: usize) -> Result<(), ArmError> {
    if reserve == 0 && name.is_empty() {
        return Err(ArmError::invalid(field, "the name must not be empty"));
    }
    if name.chars().count() + reserve > MAX_NAME_LEN {
        return Err(ArmError::invalid(
            field,
            format!("names are at most {MAX_NAME_LEN} characters long"),
        ));
    }
    let refused = |c: char| c.is_whitespace() || c.is_control() || "/\\?#%&".contains(c);
    if name.chars().any(refused) {
        return Err(ArmError::invalid(
            field,
            format!(
                "'{name}' has a character a resource name cannot hold (whitespace or / \\ ? # % &)"
            ),
        ));
    }
    Ok(())
}

fn shape(
    scope: &Scope,
    field: &str,
    kind: Option<String>,
    tags: Option<BTreeMap<String, String>>,
    attached_to: Option<String>,
    disk_size_gb: Option<u64>,
) -> Result<Shape, ArmError> {
    let kind = match kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("vm") => Kind::Vm,
        Some("nic") => Kind::Nic,
        Some("disk") => Kind::Disk,
        Some(other) => {
            return Err(ArmError::invalid(
                &format!("{field}.type"),
                format!("unknown type '{other}': use vm, nic or disk"),
            ));
        }
        None => {
            return Err(ArmError::invalid(
                &format!("{field}.type"),
                "type is required: vm, nic or disk",
            ));
        }
    };
    let tags = tags.unwrap_or_default();
    let tag_body = json!({ "tags": tags });
    super::http::check_tag_names(&tag_body)?;
    let attached_to = match attached_to {
        None => None,
        Some(_) if kind == Kind::Vm => {
            return Err(ArmError::invalid(
                &format!("{field}.attachedTo"),
                "only a nic or a disk can be attached to a VM",
            ));
        }
        Some(vm) => Some(vm_id(scope, &vm, &format!("{field}.attachedTo"))?),
    };
    if disk_size_gb.is_some() && kind != Kind::Disk {
        return Err(ArmError::invalid(
            &format!("{field}.diskSizeGB"),
            "only a disk has a size",
        ));
    }
    let disk_size_gb = disk_size_gb.unwrap_or(DEFAULT_DISK_SIZE_GB);
    if disk_size_gb == 0 {
        return Err(ArmError::invalid(
            &format!("{field}.diskSizeGB"),
            "diskSizeGB must be at least 1",
        ));
    }
    Ok(Shape {
        kind,
        tags: tag_body["tags"].clone(),
        attached_to,
        disk_size_gb,
    })
}

/// The id of the VM `attachedTo` names: a VM name in the seed's scope, or a VM's full id.
fn vm_id(scope: &Scope, vm: &str, field: &str) -> Result<String, ArmError> {
    if vm.starts_with('/') {
        let lower = vm.to_ascii_lowercase();
        let well_formed = lower.starts_with("/subscriptions/")
            && lower.contains("/resourcegroups/")
            && lower.contains("/providers/microsoft.compute/virtualmachines/")
            && !vm.ends_with('/');
        if !well_formed {
            return Err(ArmError::invalid(
                field,
                format!("'{vm}' is neither a VM name nor a VM id"),
            ));
        }
        return Ok(vm.to_owned());
    }
    check_name(vm, field, 0)?;
    Ok(resource_id(
        &scope.subscription,
        &scope.resource_group,
        Kind::Vm,
        vm,
    ))
}

/// Writes every resource of the plan (replacing stored ones of the same name); refuses the whole
/// plan with 409 when one to replace has an operation in progress.
pub fn apply(core: &mut Core, plan: &SeedPlan, now: DateTime<Utc>) -> Result<usize, ArmError> {
    let scope = &plan.scope;
    let id_of = |(shape, name, _): &(usize, String, Option<String>)| {
        resource_id(
            &scope.subscription,
            &scope.resource_group,
            plan.shapes[*shape].kind,
            name,
        )
    };
    for item in &plan.items {
        if let Some(busy) = core.state.get(&id_of(item)).filter(|r| r.busy.is_some()) {
            return Err(ArmError::Busy(busy.id().to_owned()));
        }
    }
    let created = timestamp(now);
    for item in &plan.items {
        let id = id_of(item);
        let resource = build(
            scope,
            &plan.shapes[item.0],
            &id,
            &item.1,
            item.2.as_deref(),
            &created,
        );
        core.state.resources.insert(key(&id), resource);
    }
    Ok(plan.items.len())
}

/// One seeded resource.
fn build(
    scope: &Scope,
    shape: &Shape,
    id: &str,
    name: &str,
    machine: Option<&str>,
    created: &str,
) -> Resource {
    let mut tags = shape.tags.clone();
    if let (Some(machine), Some(tags)) = (machine, tags.as_object_mut()) {
        tags.insert(MACHINE_TAG.to_owned(), Value::String(machine.to_owned()));
    }
    let envelope = |properties: Value| {
        json!({
            "id": id,
            "name": name,
            "type": shape.kind.type_name(),
            "location": scope.location,
            "tags": tags,
            "properties": properties,
        })
    };
    let mut resource = match shape.kind {
        Kind::Vm => {
            let mut vm = Resource::new(
                Kind::Vm,
                envelope(json!({
                    "vmId": uuid::Uuid::new_v4().to_string(),
                    "timeCreated": created,
                    "provisioningState": "Succeeded",
                    "hardwareProfile": { "vmSize": SEEDED_VM_SIZE },
                    "osProfile": { "computerName": name },
                    "storageProfile": { "dataDisks": [] },
                    "networkProfile": { "networkInterfaces": [] },
                })),
            );
            // Powered on, but the guest never booted: no Node registers for it.
            vm.power = Some(Power::Running);
            vm
        }
        Kind::Nic => {
            let subnet = format!(
                "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/seeded/subnets/default",
                scope.subscription, scope.resource_group
            );
            let mut properties = json!({
                "provisioningState": "Succeeded",
                "resourceGuid": uuid::Uuid::new_v4().to_string(),
                "ipConfigurations": [{
                    "name": "ipconfig1",
                    "properties": {
                        "subnet": { "id": subnet },
                        "privateIPAllocationMethod": "Dynamic",
                        "primary": true,
                    },
                }],
            });
            if let Some(vm) = &shape.attached_to {
                properties["virtualMachine"] = json!({ "id": vm });
            }
            Resource::new(Kind::Nic, envelope(properties))
        }
        Kind::Disk => {
            let state = if shape.attached_to.is_some() {
                "Attached"
            } else {
                "Unattached"
            };
            let mut body = envelope(json!({
                "creationData": { "createOption": "Empty" },
                "diskSizeGB": shape.disk_size_gb,
                "diskState": state,
                "timeCreated": created,
                "uniqueId": uuid::Uuid::new_v4().to_string(),
                "provisioningState": "Succeeded",
            }));
            body["sku"] = json!({ "name": "Standard_LRS" });
            if let Some(vm) = &shape.attached_to {
                body["managedBy"] = json!(vm);
            }
            Resource::new(Kind::Disk, body)
        }
        // The seed takes only VMs, NICs and disks (`plan` refuses other types).
        Kind::Gallery | Kind::GalleryImage | Kind::GalleryImageVersion => Resource::new(
            shape.kind,
            envelope(json!({ "provisioningState": "Succeeded" })),
        ),
        // Seed plans name VMs, NICs and disks only (see `plan`): a network would be empty.
        Kind::VirtualNetwork => Resource::new(
            Kind::VirtualNetwork,
            envelope(json!({
                "addressSpace": { "addressPrefixes": [] },
                "subnets": [],
                "provisioningState": "Succeeded",
            })),
        ),
    };
    resource.new_etag();
    resource
}

/// Removes every VM, NIC and disk whose name starts with `prefix` (case-insensitively, as ARM
/// compares names), without operations; returns how many. Virtual networks and galleries stay.
pub fn remove(core: &mut Core, prefix: &str) -> usize {
    let before = core.state.resources.len();
    core.state.resources.retain(|_, r| {
        let name = r.name();
        // Only the kinds a seed makes: networks and galleries are never seeded.
        let seedable = matches!(r.kind, Kind::Vm | Kind::Nic | Kind::Disk);
        let prefixed = name.len() >= prefix.len()
            && name.is_char_boundary(prefix.len())
            && name[..prefix.len()].eq_ignore_ascii_case(prefix);
        !(seedable && prefixed)
    });
    before - core.state.resources.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(body: Value) -> Result<SeedPlan, ArmError> {
        serde_json::from_value::<SeedRequest>(body)
            .map_err(|e| ArmError::InvalidRequestContent(e.to_string()))?
            .plan()
    }

    #[test]
    fn a_generator_can_give_each_resource_its_own_machine_tag_and_a_suffix() {
        let generated = plan(json!({"generate": [{
            "type": "nic", "prefix": "web-m", "suffix": "-nic", "count": 2, "machineTag": true,
            "tags": {"nodewright.io-cluster": "prod"},
        }]}))
        .unwrap();
        let items: Vec<(&str, Option<&str>)> = generated
            .items
            .iter()
            .map(|(_, name, machine)| (name.as_str(), machine.as_deref()))
            .collect();
        assert_eq!(
            items,
            [
                ("web-m00000-nic", Some("web-m00000")),
                ("web-m00001-nic", Some("web-m00001"))
            ]
        );
        let plain =
            plan(json!({"generate": [{"type": "nic", "prefix": "x", "count": 1}]})).unwrap();
        assert_eq!(plain.items[0].1, "x00000");
        assert_eq!(plain.items[0].2, None);
    }

    fn target(error: ArmError) -> String {
        match error {
            ArmError::InvalidParameter { target, .. } => target,
            other => panic!("not InvalidParameter: {other:?}"),
        }
    }

    #[test]
    fn generated_names_are_the_prefix_and_a_five_digit_index() {
        let plan = plan(json!({"generate": [{"type": "vm", "prefix": "g-", "count": 3}]})).unwrap();
        let names: Vec<&str> = plan.items.iter().map(|(_, n, _)| n.as_str()).collect();
        assert_eq!(names, ["g-00000", "g-00001", "g-00002"]);
    }

    #[test]
    fn invalid_fields_are_named() {
        let cases = [
            (
                json!({"resources": [{"type": "lb", "name": "x"}]}),
                "resources[0].type",
            ),
            (
                json!({"resources": [{"type": "vm", "name": "a"}, {"type": "vm", "name": ""}]}),
                "resources[1].name",
            ),
            (json!({"resources": [{"type": "vm"}]}), "resources[0].name"),
            (
                json!({"resources": [{"type": "vm", "name": "a/b"}]}),
                "resources[0].name",
            ),
            (
                json!({"resources": [{"type": "vm", "name": "a", "attachedTo": "b"}]}),
                "resources[0].attachedTo",
            ),
            (
                json!({"resources": [{"type": "nic", "name": "a", "diskSizeGB": 4}]}),
                "resources[0].diskSizeGB",
            ),
            (
                json!({"generate": [{"type": "vm", "prefix": "p", "count": 100_001}]}),
                "generate[0].count",
            ),
            (
                json!({"generate": [{"type": "vm", "prefix": "p"}]}),
                "generate[0].count",
            ),
            (
                json!({"generate": [{"prefix": "p", "count": 1}]}),
                "generate[0].type",
            ),
            (json!({"resourceGroup": ""}), "resourceGroup"),
        ];
        for (body, field) in cases {
            assert_eq!(target(plan(body.clone()).err().unwrap()), field, "{body}");
        }
    }

    #[test]
    fn attached_to_takes_a_name_in_the_scope_or_a_full_id() {
        let plan = plan(json!({
            "subscriptionId": "s", "resourceGroup": "rg",
            "resources": [
                {"type": "nic", "name": "a", "attachedTo": "vm-1"},
                {"type": "disk", "name": "b", "attachedTo": "/subscriptions/t/resourceGroups/o/providers/Microsoft.Compute/virtualMachines/vm-2"},
            ],
        }))
        .unwrap();
        assert_eq!(
            plan.shapes[0].attached_to.as_deref(),
            Some(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-1"
            )
        );
        assert_eq!(
            plan.shapes[1].attached_to.as_deref(),
            Some(
                "/subscriptions/t/resourceGroups/o/providers/Microsoft.Compute/virtualMachines/vm-2"
            )
        );
    }
}
