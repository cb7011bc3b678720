//! A pool's revisions in the cluster (`nodewright_model::rollout::revisions`): the ConfigMap
//! `nodewright-revisions-<pool>` in the identity namespace, read for `pool history` and
//! `pool rollback`, and written by the rollout at its start and end.
//!
//! A write is a read-modify-write: the ConfigMap is read, the change applied by the model, and
//! the result created (when absent) or replaced with the `resourceVersion` read, so that two
//! writers never lose each other's revision; a conflict (409) reads again, a few times. A
//! ConfigMap of that name without the label `app.kubernetes.io/managed-by=nodewright` is
//! someone else's: it is never written.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use nodewright_model::ownership::LABEL_POOL;
use nodewright_model::rollout::revisions::{LABEL_MANAGED_BY, MANAGED_BY, config_map_name};
use nodewright_model::rollout::{PoolRevisions, RevisionChange, Revisions, StoredRevisions};
use serde::{Deserialize, Serialize};

use super::error::{Error, Result};

/// How many times a write reads again after a conflict before it fails (retryably).
const CONFLICT_ATTEMPTS: usize = 5;

/// Read a pool's revisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadRevisions {
    /// The pool.
    pub pool: String,
}

/// Record a rollout's start or end in its pool's revisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordRevision {
    /// The pool.
    pub pool: String,
    /// What to record.
    pub change: RevisionChange,
}

/// What a write left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionRecorded {
    /// `<namespace>/<name>` of the ConfigMap.
    pub config_map: String,
    /// The number of the revision written.
    pub number: u64,
}

/// Reads the revisions of `input.pool` in `namespace`.
pub async fn read(
    client: &kube::Client,
    namespace: &str,
    input: &ReadRevisions,
) -> Result<PoolRevisions> {
    let name = config_map_name(&input.pool);
    let config_map = format!("{namespace}/{name}");
    let found = get(client, namespace, &name, &config_map).await?;
    Ok(PoolRevisions {
        stored: stored(found.as_ref()),
        config_map,
    })
}

/// Applies `input.change` to the revisions of `input.pool` in `namespace`.
pub async fn record(
    client: &kube::Client,
    namespace: &str,
    input: &RecordRevision,
) -> Result<RevisionRecorded> {
    let name = config_map_name(&input.pool);
    let config_map = format!("{namespace}/{name}");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let hash = match &input.change {
        RevisionChange::Started(start) => &start.pool.template_hash,
        RevisionChange::Ended(end) => &end.start.pool.template_hash,
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let found = get(client, namespace, &name, &config_map).await?;
        let before =
            Revisions::parse(&config_map, &stored(found.as_ref())).map_err(Error::Revisions)?;
        let after = before.apply(&input.change);
        let number = after
            .entries
            .iter()
            .find(|e| &e.template_hash == hash)
            .map_or(0, |e| e.number);
        let written = match found {
            None => {
                let object = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(namespace.to_owned()),
                        labels: Some(BTreeMap::from([
                            (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
                            (LABEL_POOL.to_owned(), input.pool.clone()),
                        ])),
                        ..ObjectMeta::default()
                    },
                    data: Some(after.to_data()),
                    ..ConfigMap::default()
                };
                api.create(&PostParams::default(), &object).await
            }
            Some(mut object) => {
                // The resourceVersion read stays in the metadata: a change since is a 409.
                object.data = Some(after.to_data());
                api.replace(&name, &PostParams::default(), &object).await
            }
        };
        match written {
            Ok(_) => return Ok(RevisionRecorded { config_map, number }),
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < CONFLICT_ATTEMPTS => {}
            Err(source) => return Err(Error::WriteRevisions { config_map, source }),
        }
    }
}

/// The ConfigMap, `None` when absent.
async fn get(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    config_map: &str,
) -> Result<Option<ConfigMap>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    api.get_opt(name)
        .await
        .map_err(|source| Error::ReadRevisions {
            config_map: config_map.to_owned(),
            source,
        })
}

/// What a ConfigMap as found holds for the model: absent, someone else's, or its data.
fn stored(found: Option<&ConfigMap>) -> StoredRevisions {
    let Some(object) = found else {
        return StoredRevisions::Absent;
    };
    let ours = object
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(LABEL_MANAGED_BY))
        .is_some_and(|value| value == MANAGED_BY);
    if ours {
        StoredRevisions::Found(object.data.clone().unwrap_or_default())
    } else {
        StoredRevisions::Foreign
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_config_map_labelled_as_nodewrights_is_read() {
        assert_eq!(stored(None), StoredRevisions::Absent);
        let mut object = ConfigMap {
            data: Some(BTreeMap::from([("aaa".to_owned(), "{}".to_owned())])),
            ..ConfigMap::default()
        };
        assert_eq!(stored(Some(&object)), StoredRevisions::Foreign);
        object.metadata.labels = Some(BTreeMap::from([(
            LABEL_MANAGED_BY.to_owned(),
            "helm".to_owned(),
        )]));
        assert_eq!(stored(Some(&object)), StoredRevisions::Foreign);
        object.metadata.labels = Some(BTreeMap::from([(
            LABEL_MANAGED_BY.to_owned(),
            MANAGED_BY.to_owned(),
        )]));
        assert!(matches!(stored(Some(&object)), StoredRevisions::Found(data) if data.len() == 1));
    }
}
