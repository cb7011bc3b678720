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
/// Tag: when nodewright created the resource, RFC 3339.
pub const TAG_CREATED: &str = "nodewright.io-created";

/// Node label: the pool.
pub const LABEL_POOL: &str = "nodewright.io/pool";
/// Node label: the machine.
pub const LABEL_MACHINE: &str = "nodewright.io/machine";
/// Node label: the template hash.
pub const LABEL_TEMPLATE: &str = "nodewright.io/template";

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
        ] {
            tags.insert(name.to_owned(), value.to_owned());
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
        labels
    }
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
    }

    #[test]
    fn tag_names_avoid_the_characters_azure_refuses() {
        for name in [
            TAG_CLUSTER,
            TAG_POOL,
            TAG_MACHINE,
            TAG_TEMPLATE,
            TAG_CREATED,
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
                if ![TAG_CLUSTER, TAG_POOL, TAG_MACHINE, TAG_TEMPLATE, TAG_CREATED].contains(&key.as_str()) {
                    prop_assert_eq!(&tags[key], value);
                }
            }
        }
    }
}
