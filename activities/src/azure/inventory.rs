//! The orphan sweep's inventory of the resource group: VMs, NICs and disks, a bounded number of
//! list pages per call, each resource reduced to what the classifier needs.

use std::collections::{BTreeMap, HashSet};

use nodewright_model::ownership::{TAG_CREATED, TAG_CREATION_DEADLINE, TAG_CREATION_ENDED};
use nodewright_model::sweep::{ArmResource, ResourceKind, name_from_id};
use serde::{Deserialize, Serialize};
use url::Url;

use super::{ArmClient, Error, disks, network_interfaces, virtual_machines};

/// Tags whose name starts with this are kept; the others never decide anything.
const NODEWRIGHT_TAG_PREFIX: &str = "nodewright.io-";

/// List pages of one kind, from `next_link` (none: the first page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListInventoryPage {
    /// VMs, NICs or disks.
    pub kind: ResourceKind,
    /// The `nextLink` the previous call ended at.
    #[serde(default)]
    pub next_link: Option<String>,
    /// Stop after this many resources (whole pages: a call may return a page more).
    pub max_items: u32,
}

/// Resources of one kind and where the list goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InventoryPage {
    /// The resources, in list order.
    pub resources: Vec<ArmResource>,
    /// Where the list goes on (none: it ended).
    #[serde(default)]
    pub next_link: Option<String>,
    /// List pages (ARM GETs) this call made.
    pub pages: u32,
}

/// What a list page says of a VM, NIC or disk (the rest of the body is skipped).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    tags: BTreeMap<String, String>,
    #[serde(default)]
    managed_by: Option<String>,
    #[serde(default)]
    properties: ListedProperties,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListedProperties {
    #[serde(default)]
    provisioning_state: Option<String>,
    #[serde(default)]
    virtual_machine: Option<SubResource>,
}

#[derive(Debug, Deserialize)]
struct SubResource {
    #[serde(default)]
    id: Option<String>,
}

/// The most ARM list pages one call follows. A listing whose pages hold few resources (or none:
/// a chain of distinct links to empty pages) returns after this many with its next link, so
/// that each call stays short and the sweep's page guard, which counts calls, ends an endless
/// chain; pages of real listings hold hundreds of resources, so this rarely splits one.
pub const MAX_PAGES_PER_CALL: u32 = 20;

/// Lists pages of `input.kind` until `max_items` resources, [`MAX_PAGES_PER_CALL`] pages, the
/// end of the list, or a `nextLink` back to a page this call read: that link is returned as
/// `next_link`, so the sweep's page guard sees it repeat and freezes (instead of this call
/// reading the same page, perhaps an empty one, until it times out).
pub async fn list_inventory_page(
    client: &ArmClient,
    input: &ListInventoryPage,
) -> Result<InventoryPage, Error> {
    let wrap = |source| match input.kind {
        ResourceKind::Vm => Error::ListVms(source),
        ResourceKind::Nic => Error::ListNics(source),
        ResourceKind::Disk => Error::ListDisks(source),
    };
    let mut next = match &input.next_link {
        Some(link) => Some(client.returned_url(link).map_err(wrap)?),
        None => Some(first_page(client, input.kind)),
    };
    let mut resources = Vec::new();
    let mut pages = 0;
    let mut read = HashSet::new();
    while let Some(url) = next.take() {
        let (items, following) = client
            .list_page::<Listed>(url.clone())
            .await
            .map_err(wrap)?;
        read.insert(url);
        pages += 1;
        resources.extend(
            items
                .into_iter()
                .filter_map(|item| reduce(input.kind, item)),
        );
        next = following;
        let repeats = next.as_ref().is_some_and(|link| read.contains(link));
        let enough = resources.len() >= input.max_items as usize || pages >= MAX_PAGES_PER_CALL;
        if repeats || enough {
            break;
        }
    }
    Ok(InventoryPage {
        resources,
        next_link: next.map(String::from),
        pages,
    })
}

fn first_page(client: &ArmClient, kind: ResourceKind) -> Url {
    let (resource_type, api_version) = match kind {
        ResourceKind::Vm => (
            virtual_machines::RESOURCE_TYPE,
            virtual_machines::API_VERSION,
        ),
        ResourceKind::Nic => (
            network_interfaces::RESOURCE_TYPE,
            network_interfaces::API_VERSION,
        ),
        ResourceKind::Disk => (disks::RESOURCE_TYPE, disks::API_VERSION),
    };
    client.resource_url(resource_type, &[], api_version)
}

/// The resource as the classifier sees it (none without a name).
fn reduce(kind: ResourceKind, listed: Listed) -> Option<ArmResource> {
    let name = listed.name?;
    let time = |tag: &str| {
        listed
            .tags
            .get(tag)
            .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
            .map(|time| time.timestamp())
    };
    let created_at = time(TAG_CREATED);
    let creation_deadline = time(TAG_CREATION_DEADLINE);
    let creation_ended = time(TAG_CREATION_ENDED);
    let attached_to = match kind {
        ResourceKind::Vm => None,
        ResourceKind::Nic => listed.properties.virtual_machine.and_then(|vm| vm.id),
        ResourceKind::Disk => listed.managed_by,
    }
    .filter(|id| !id.is_empty())
    .map(|id| name_from_id(&id).to_owned());
    let tags = listed
        .tags
        .into_iter()
        .filter(|(name, _)| name.starts_with(NODEWRIGHT_TAG_PREFIX))
        .collect();
    Some(ArmResource {
        kind,
        name,
        tags,
        provisioning_state: listed.properties.provisioning_state.unwrap_or_default(),
        attached_to,
        created_at,
        creation_deadline,
        creation_ended,
    })
}

#[cfg(test)]
mod tests {
    use nodewright_model::ownership::{TAG_CLUSTER, TAG_MACHINE};
    use serde_json::json;

    use super::*;

    fn listed(value: serde_json::Value) -> Listed {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_listed_resource_keeps_its_nodewright_tags_state_attachment_and_creation() {
        let nic = listed(json!({
            "name": "web-a1b2c-nic",
            "tags": { TAG_CLUSTER: "prod", TAG_MACHINE: "web-a1b2c", TAG_CREATED: "2026-01-02T03:04:05Z", "team": "x" },
            "properties": {
                "provisioningState": "Succeeded",
                "virtualMachine": { "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web-a1b2c" },
                "ipConfigurations": []
            }
        }));
        let reduced = reduce(ResourceKind::Nic, nic).unwrap();
        assert_eq!(reduced.attached_to.as_deref(), Some("web-a1b2c"));
        assert_eq!(reduced.created_at, Some(1_767_323_045));
        assert_eq!(reduced.provisioning_state, "Succeeded");
        assert_eq!(reduced.tags.len(), 3, "{:?}", reduced.tags);
        let disk = listed(json!({
            "name": "pvc-1",
            "managedBy": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/web-x",
            "tags": { "nodewright.io-created": "yesterday" },
            "properties": { "diskState": "Attached" }
        }));
        let reduced = reduce(ResourceKind::Disk, disk).unwrap();
        assert_eq!(reduced.attached_to.as_deref(), Some("web-x"));
        assert_eq!(reduced.created_at, None);
        let vm = listed(json!({ "name": "untagged" }));
        let reduced = reduce(ResourceKind::Vm, vm).unwrap();
        assert!(reduced.tags.is_empty() && reduced.attached_to.is_none());
        assert!(reduce(ResourceKind::Vm, listed(json!({ "tags": {} }))).is_none());
    }

    #[test]
    fn a_listed_resource_keeps_its_creation_deadline_end_and_kept_marker() {
        let vm = listed(json!({
            "name": "web-a1b2c",
            "tags": {
                TAG_CREATED: "2026-01-02T03:04:05Z",
                TAG_CREATION_DEADLINE: "2026-01-02T03:24:05Z",
                TAG_CREATION_ENDED: "2026-01-02T03:10:05+00:00",
                "nodewright.io-kept": "2026-01-02T03:10:05Z: create failed",
            },
        }));
        let reduced = reduce(ResourceKind::Vm, vm).unwrap();
        assert_eq!(reduced.creation_deadline, Some(1_767_323_045 + 20 * 60));
        assert_eq!(reduced.creation_ended, Some(1_767_323_045 + 6 * 60));
        assert_eq!(
            reduced.tags["nodewright.io-kept"],
            "2026-01-02T03:10:05Z: create failed"
        );
        let garbled = listed(json!({
            "name": "web-a1b2c",
            "tags": { TAG_CREATION_DEADLINE: "soon", TAG_CREATION_ENDED: "" },
        }));
        let reduced = reduce(ResourceKind::Vm, garbled).unwrap();
        assert_eq!(
            (reduced.creation_deadline, reduced.creation_ended),
            (None, None)
        );
    }
}
