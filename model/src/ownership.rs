//! How nodewright marks what it creates, and how it recognises it again (architecture §2).
//!
//! Azure resources carry ownership **tags** (Azure refuses `/ < > % & \ ?` in tag names, so they
//! use dots and dashes); Nodes carry **labels** and the VM's **providerID**. A resource without the
//! exact cluster tag is never modified or deleted: [`is_owned_by`] is the one test of that rule.

use std::collections::BTreeMap;

use crate::cluster::ClusterName;

/// Tag: the cluster that owns the resource.
pub const TAG_CLUSTER: &str = "nodewright.io-cluster";
/// Tag: the pool the machine belongs to.
pub const TAG_POOL: &str = "nodewright.io-pool";
/// Tag: the machine (VM name) the resource belongs to.
pub const TAG_MACHINE: &str = "nodewright.io-machine";
/// Tag: the hash of the pool template the machine was built from.
pub const TAG_TEMPLATE: &str = "nodewright.io-template";
/// Tag: when nodewright created the resource, RFC 3339 (the start of the create that made it).
pub const TAG_CREATED: &str = "nodewright.io-created";
/// Tag: the deadline of the create that made the resource (its start plus its creation timeout),
/// RFC 3339: until then that create may still be running.
pub const TAG_CREATION_DEADLINE: &str = "nodewright.io-creation-deadline";
/// Tag: when the create that made the resource ended, RFC 3339 (written when a failed create
/// keeps the machine for debugging).
pub const TAG_CREATION_ENDED: &str = "nodewright.io-creation-ended";
/// Tag: the machine is kept for debugging (`machine create --keep-on-failure`), as
/// `<RFC 3339 time>: <reason>`. The orphan sweep never removes a resource that carries it, nor
/// the Node of its machine; removing the tag lets the sweep judge the resource again.
pub const TAG_KEPT: &str = "nodewright.io-kept";

/// Tag (VMs): the image version the machine was made from (a marketplace or gallery image;
/// Azure refuses `/` in tag names, hence the `-`).
pub const TAG_IMAGE_VERSION: &str = "nodewright.io-image-version";

/// Tag (VMs only): the pool's drain settings the machine was created with
/// ([`crate::drain::policy_to_tag`]), the trusted baseline the Node's drain-policy annotation is
/// bounded by. Only writers of ARM tags can change it; a Node cannot.
pub const TAG_DRAIN: &str = "nodewright.io-drain";

/// Tag (VMs and NICs): the create run that made the resource, `<workflow id>/<first run id>`
/// ([`crate::machine::adoption::create_run`]). A create adopts a resource under its machine's
/// name only when this tag names its own run (a retry of one of its steps): never a VM or NIC
/// another run, or another template, made under the same name.
pub const TAG_CREATE_RUN: &str = "nodewright.io-create-run";

/// The longest tag value Azure accepts, in characters.
pub const MAX_TAG_VALUE_CHARS: usize = 256;

/// Label of a Kubernetes object nodewright creates that no Node label identifies (a machine's
/// join token Secret): the owning cluster.
pub const LABEL_CLUSTER: &str = "nodewright.io/cluster";
/// Node label: the pool.
pub const LABEL_POOL: &str = "nodewright.io/pool";
/// Node label: the machine.
pub const LABEL_MACHINE: &str = "nodewright.io/machine";
/// Node label: the template hash.
pub const LABEL_TEMPLATE: &str = "nodewright.io/template";
/// Node label: the image version the machine was made from (an image with versions).
pub const LABEL_IMAGE_VERSION: &str = "nodewright.io/image-version";
/// Node annotation: the machine's delete priority, a whole number (lower goes first when its pool
/// scales down; as Cluster API's `cluster.x-k8s.io/delete-machine` and MCM's machine priority).
pub const ANNOTATION_DELETE_PRIORITY: &str = "nodewright.io/delete-priority";

/// What a machine's resources are tagged and labelled with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership<'a> {
    /// The owning cluster.
    pub cluster: &'a ClusterName,
    /// The machine's pool.
    pub pool: &'a str,
    /// The machine's name (= VM name = node name).
    pub machine: &'a str,
    /// The template hash.
    pub template: &'a str,
    /// Creation time, RFC 3339 (the workflow's time, never the activity's clock).
    pub created: &'a str,
    /// The create's deadline (creation time plus the creation timeout), RFC 3339.
    pub creation_deadline: &'a str,
    /// The concrete image version the machine is made from, if its image has versions.
    pub image_version: Option<&'a str>,
}

impl Ownership<'_> {
    /// The ownership tags, merged over `user_tags`: a user tag can never override ownership.
    pub fn tags(&self, user_tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut tags = user_tags.clone();
        for (name, value) in [
            (TAG_CLUSTER, self.cluster.as_str()),
            (TAG_POOL, self.pool),
            (TAG_MACHINE, self.machine),
            (TAG_TEMPLATE, self.template),
            (TAG_CREATED, self.created),
            (TAG_CREATION_DEADLINE, self.creation_deadline),
        ] {
            tags.insert(name.to_owned(), value.to_owned());
        }
        if let Some(version) = self.image_version {
            tags.insert(TAG_IMAGE_VERSION.to_owned(), version.to_owned());
        }
        tags
    }

    /// The ownership labels, merged over `user_labels`: a user label can never override them.
    pub fn labels(&self, user_labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut labels = user_labels.clone();
        for (name, value) in [
            (LABEL_POOL, self.pool),
            (LABEL_MACHINE, self.machine),
            (LABEL_TEMPLATE, self.template),
        ] {
            labels.insert(name.to_owned(), value.to_owned());
        }
        if let Some(version) = self.image_version {
            labels.insert(LABEL_IMAGE_VERSION.to_owned(), version.to_owned());
        }
        labels
    }
}

/// The tags a failed create that keeps its machine merges into the machine's VM, NIC and OS
/// disk: the kept marker ([`kept_marker`]) and the create's end.
pub fn kept_tags(marker: String, ended: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (TAG_KEPT.to_owned(), marker),
        (TAG_CREATION_ENDED.to_owned(), ended.to_owned()),
    ])
}

/// The value of the [`TAG_KEPT`] marker, `<time>: <reason>`, cut (on a character boundary, with
/// `…`) to the [`MAX_TAG_VALUE_CHARS`] Azure accepts.
pub fn kept_marker(time: &str, reason: &str) -> String {
    bounded(&format!("{time}: {reason}"), MAX_TAG_VALUE_CHARS)
}

/// The kept marker among `tags` (its name compared ignoring case, as Azure compares tag names),
/// made fit for a message: control characters become spaces and it is cut to
/// [`MAX_TAG_VALUE_CHARS`]. `None`: the resource is not kept.
pub fn kept(tags: &BTreeMap<String, String>) -> Option<String> {
    tags.iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(TAG_KEPT))
        .map(|(_, value)| bounded(value, MAX_TAG_VALUE_CHARS))
}

/// `text` with control characters as spaces, at most `max` characters (the last one `…` when
/// cut).
fn bounded(text: &str, max: usize) -> String {
    let clean = |c: char| if c.is_control() { ' ' } else { c };
    if text.chars().count() <= max {
        return text.chars().map(clean).collect();
    }
    let mut cut: String = text
        .chars()
        .take(max.saturating_sub(1))
        .map(clean)
        .collect();
    cut.push('…');
    cut
}

/// Whether `tags` say the resource belongs to `cluster`: the exact cluster tag, exact value.
pub fn is_owned_by(tags: &BTreeMap<String, String>, cluster: &ClusterName) -> bool {
    tags.get(TAG_CLUSTER).map(String::as_str) == Some(cluster.as_str())
}

/// Why a resource's cluster tag makes it someone else's, for a message: `its tag
/// nodewright.io-cluster is "other", not "prod"`, or `it has no nodewright.io-cluster tag (this
/// cluster is "prod")` when the tag is missing.
pub fn cluster_tag_mismatch(found: Option<&str>, cluster: &str) -> String {
    let cluster = crate::text::quoted(cluster);
    match found {
        Some(found) => format!(
            "its tag {TAG_CLUSTER} is {}, not {cluster}",
            crate::text::quoted(found)
        ),
        None => format!("it has no {TAG_CLUSTER} tag (this cluster is {cluster})"),
    }
}

/// The ARM id of VM `name`.
pub fn vm_id(subscription_id: &str, resource_group: &str, name: &str) -> String {
    format!(
        "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.Compute/virtualMachines/{name}"
    )
}

/// The providerID a kubelet on VM `name` registers its Node with.
pub fn provider_id(subscription_id: &str, resource_group: &str, name: &str) -> String {
    format!("azure://{}", vm_id(subscription_id, resource_group, name))
}

/// Whether a Node's providerID names the VM with ARM id `vm_id` (ARM ids compare
/// case-insensitively; cloud providers often lower-case `resourceGroups`).
pub fn provider_id_names_vm(provider_id: &str, vm_id: &str) -> bool {
    provider_id
        .strip_prefix("azure://")
        .is_some_and(|id| id.eq_ignore_ascii_case(vm_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cluster(name: &str) -> ClusterName {
        ClusterName::parse("cluster", name).unwrap()
    }

    fn ownership(cluster: &ClusterName) -> Ownership<'_> {
        Ownership {
            cluster,
            pool: "web",
            machine: "web-a1b2c",
            template: "7f3a9c",
            created: "2026-11-21T03:00:00Z",
            creation_deadline: "2026-11-21T03:20:00Z",
            image_version: None,
        }
    }

    #[test]
    fn a_foreign_cluster_tag_reads_as_words_never_as_an_option() {
        let table = [
            (
                Some("other"),
                r#"its tag nodewright.io-cluster is "other", not "prod""#,
            ),
            (
                Some(""),
                r#"its tag nodewright.io-cluster is "", not "prod""#,
            ),
            (
                None,
                r#"it has no nodewright.io-cluster tag (this cluster is "prod")"#,
            ),
        ];
        for (found, expected) in table {
            assert_eq!(cluster_tag_mismatch(found, "prod"), expected);
        }
    }

    #[test]
    fn tags_carry_every_ownership_field_and_keep_user_tags() {
        let prod = cluster("prod-weu");
        let user = BTreeMap::from([("team".to_owned(), "payments".to_owned())]);
        let tags = ownership(&prod).tags(&user);
        assert_eq!(tags["team"], "payments");
        assert_eq!(tags[TAG_CLUSTER], "prod-weu");
        assert_eq!(tags[TAG_POOL], "web");
        assert_eq!(tags[TAG_MACHINE], "web-a1b2c");
        assert_eq!(tags[TAG_TEMPLATE], "7f3a9c");
        assert_eq!(tags[TAG_CREATED], "2026-11-21T03:00:00Z");
        assert_eq!(tags[TAG_CREATION_DEADLINE], "2026-11-21T03:20:00Z");
        assert!(!tags.contains_key(TAG_KEPT), "a new machine is not kept");
    }

    #[test]
    fn the_kept_marker_is_time_and_reason_within_azures_value_limit() {
        let marker = kept_marker(
            "2026-11-21T03:20:00Z",
            "create failed at step register-node",
        );
        assert_eq!(
            marker,
            "2026-11-21T03:20:00Z: create failed at step register-node"
        );
        let long = kept_marker("2026-11-21T03:20:00Z", &"é".repeat(400));
        assert_eq!(long.chars().count(), MAX_TAG_VALUE_CHARS);
        assert!(long.ends_with('…'));
        let tags = kept_tags(marker.clone(), "2026-11-21T03:20:00Z");
        assert_eq!(kept(&tags), Some(marker));
        assert_eq!(tags[TAG_CREATION_ENDED], "2026-11-21T03:20:00Z");
    }

    #[test]
    fn the_kept_marker_is_found_whatever_the_case_and_read_safely() {
        let tags = |name: &str, value: &str| BTreeMap::from([(name.to_owned(), value.to_owned())]);
        assert_eq!(kept(&tags("Nodewright.IO-Kept", "x")), Some("x".to_owned()));
        assert_eq!(kept(&tags(TAG_KEPT, "")), Some(String::new()));
        assert_eq!(kept(&tags(TAG_KEPT, "a\nb")), Some("a b".to_owned()));
        assert_eq!(kept(&tags("nodewright.io-kept-not", "x")), None);
        assert_eq!(kept(&tags(TAG_CREATED, "x")), None);
        let huge = kept(&tags(TAG_KEPT, &"x".repeat(100_000))).unwrap_or_default();
        assert_eq!(huge.chars().count(), MAX_TAG_VALUE_CHARS);
    }

    #[test]
    fn tag_names_avoid_the_characters_azure_refuses() {
        for name in [
            TAG_CLUSTER,
            TAG_POOL,
            TAG_MACHINE,
            TAG_TEMPLATE,
            TAG_CREATED,
            TAG_CREATION_DEADLINE,
            TAG_CREATION_ENDED,
            TAG_KEPT,
            TAG_DRAIN,
        ] {
            assert!(
                !name.contains(['/', '<', '>', '%', '&', '\\', '?']),
                "{name}"
            );
        }
    }

    #[test]
    fn labels_carry_pool_machine_and_template() {
        let prod = cluster("prod-weu");
        let labels = ownership(&prod).labels(&BTreeMap::new());
        assert_eq!(labels[LABEL_POOL], "web");
        assert_eq!(labels[LABEL_MACHINE], "web-a1b2c");
        assert_eq!(labels[LABEL_TEMPLATE], "7f3a9c");
    }

    #[test]
    fn ownership_is_the_exact_cluster_tag_and_value() {
        let prod = cluster("prod");
        let check = |tags: &[(&str, &str)], expected: bool| {
            let tags = tags
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            assert_eq!(is_owned_by(&tags, &prod), expected, "{tags:?}");
        };
        check(&[(TAG_CLUSTER, "prod")], true);
        check(&[(TAG_CLUSTER, "prod-weu")], false);
        check(&[(TAG_CLUSTER, "PROD")], false);
        check(&[("nodewright.io-Cluster", "prod")], false);
        check(&[("nodewright.io/cluster", "prod")], false);
        check(&[(TAG_POOL, "web")], false);
        check(&[], false);
    }

    #[test]
    fn provider_ids_match_their_vm_whatever_the_casing() {
        let id = vm_id("sub", "rg-Nodes", "web-a1b2c");
        let provider = provider_id("sub", "rg-Nodes", "web-a1b2c");
        assert_eq!(
            provider,
            "azure:///subscriptions/sub/resourceGroups/rg-Nodes/providers/Microsoft.Compute/virtualMachines/web-a1b2c"
        );
        assert!(provider_id_names_vm(&provider, &id));
        assert!(provider_id_names_vm(&provider.to_lowercase(), &id));
        assert!(!provider_id_names_vm(
            &provider,
            &vm_id("sub", "rg-Nodes", "web-a1b2d")
        ));
        assert!(
            !provider_id_names_vm(&id, &id),
            "a bare ARM id is no providerID"
        );
    }

    proptest! {
        #[test]
        fn user_tags_and_labels_never_override_ownership(
            user in proptest::collection::btree_map("[a-z.\\-]{1,20}", "[a-z0-9]{0,10}", 0..8),
            name in "[a-z]{1,10}",
        ) {
            let prod = cluster("prod");
            let mut user = user;
            user.insert(TAG_CLUSTER.to_owned(), "someone-else".to_owned());
            user.insert(LABEL_POOL.to_owned(), "someone-else".to_owned());
            let owner = Ownership { machine: &name, ..ownership(&prod) };
            let tags = owner.tags(&user);
            prop_assert!(is_owned_by(&tags, &prod));
            prop_assert_eq!(&tags[TAG_MACHINE], &name);
            prop_assert_eq!(&owner.labels(&user)[LABEL_POOL], "web");
            for (key, value) in &user {
                if ![TAG_CLUSTER, TAG_POOL, TAG_MACHINE, TAG_TEMPLATE, TAG_CREATED, TAG_CREATION_DEADLINE].contains(&key.as_str()) {
                    prop_assert_eq!(&tags[key], value);
                }
            }
        }
    }
}
