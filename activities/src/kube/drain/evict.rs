//! Evicting a pod through `policy/v1` (which honours PodDisruptionBudgets) and, in force mode,
//! deleting it with grace period 0; both name the pod's UID, so a new pod of the same name is
//! never hit.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{Eviction as EvictionBody, PodDisruptionBudget};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Preconditions};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions as DeletePreconditions};
use kube::core::{Selector, SelectorExt, Status};
use nodewright_model::drain::{NO_ANSWER, PdbFacts, PodRef, is_not_permitted, is_several_budgets};

use super::wait::is_same_pod;
use super::{Eviction, PodAction, PodDeletion};
use crate::kube::cache::ClusterCache;
use crate::kube::error::{Error, Result};

/// The `type` of the cause that names the budget in an eviction's 429 (`policyv1.DisruptionBudgetCause`).
const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";

/// Asks for the pod's eviction with a UID precondition.
///
/// 201 is [`Eviction::Accepted`]; 404 or a UID mismatch is [`Eviction::Gone`]; 429 (a
/// PodDisruptionBudget allows no disruption now) is [`Eviction::Blocked`] with the budget that
/// selects the pod, when there is one. Any other answer, or none, is [`Eviction::Refused`] with
/// its code, reason and message (the budgets named for a refusal for several budgets): the
/// drain decides what it means.
///
/// A 429 costs no further request when the worker's mirrors (`cache`) are in sync: the pod is
/// looked up in its Node's (the input's `node`), the budget the refusal names (its
/// `DisruptionBudget` cause) in the budgets'.
///
/// The body is posted as a typed `policy/v1` Eviction rather than through kube's
/// `Api::evict`, whose body spells the field `delete_options` (the API's is `deleteOptions`),
/// so the apiserver would drop the precondition.
pub async fn evict_pod(
    client: &kube::Client,
    cache: Option<&ClusterCache>,
    input: &PodAction,
) -> Result<Eviction> {
    let pod = &input.pod;
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let asked = api
        .create_subresource::<_, Status>(
            "eviction",
            &pod.name,
            &PostParams::default(),
            &eviction_body(pod, input.grace_period_seconds),
        )
        .await;
    match asked {
        Ok(_) => Ok(Eviction::Accepted),
        Err(kube::Error::Api(status)) if is_gone(&status) => Ok(Eviction::Gone),
        Err(kube::Error::Api(status)) if status.code == 429 => {
            blocked(client, cache, input.node.as_deref(), pod, status).await
        }
        // The worker may not evict (RBAC): the drain fails at once, naming the verb.
        Err(kube::Error::Api(status))
            if is_not_permitted(status.code, &status.reason, &status.message) =>
        {
            Err(Error::EvictPod {
                pod: pod.key(),
                source: kube::Error::Api(status),
            })
        }
        Err(kube::Error::Api(status)) => refused(client, pod, &status).await,
        // No answer (connection refused, timeout): the drain retries until its deadline.
        Err(source) => Ok(Eviction::Refused {
            code: NO_ANSWER,
            reason: String::new(),
            message: source.to_string(),
            budgets: Vec::new(),
        }),
    }
}

/// Any other answer, passed on for the drain to read (`model::drain::refusal_of`); a refusal
/// for several PodDisruptionBudgets names the budgets that select the pod.
async fn refused(client: &kube::Client, pod: &PodRef, status: &Status) -> Result<Eviction> {
    let budgets = if is_several_budgets(status.code, &status.message) {
        budgets_selecting(client, pod).await?
    } else {
        Vec::new()
    };
    Ok(Eviction::Refused {
        code: status.code,
        reason: status.reason.clone(),
        message: status.message.clone(),
        budgets,
    })
}

/// Every PodDisruptionBudget of `namespace`, read from the apiserver.
async fn namespace_budgets(
    client: &kube::Client,
    namespace: &str,
) -> Result<Vec<PodDisruptionBudget>> {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), namespace);
    let listed = budgets
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::ListPdbs {
            namespace: namespace.to_owned(),
            source,
        })?;
    Ok(listed.items)
}

/// The `namespace/name` of every budget that selects `pod` (none when it is gone).
async fn budgets_selecting(client: &kube::Client, pod: &PodRef) -> Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let found = pods
        .get_opt(&pod.name)
        .await
        .map_err(|source| Error::GetPod {
            pod: pod.key(),
            source,
        })?;
    let Some(found) = found.filter(|found| is_same_pod(found, pod)) else {
        return Ok(Vec::new());
    };
    let listed = namespace_budgets(client, &pod.namespace).await?;
    let labels = found.metadata.labels.unwrap_or_default();
    Ok(listed
        .iter()
        .filter(|budget| selects(budget, &labels))
        .map(|budget| pdb_facts(budget).key())
        .collect())
}

/// Deletes the pod with grace period 0 and a UID precondition; 404 or a UID mismatch is
/// [`PodDeletion::Gone`].
pub async fn delete_pod(client: &kube::Client, input: &PodAction) -> Result<PodDeletion> {
    let pod = &input.pod;
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: (!pod.uid.is_empty()).then(|| DeletePreconditions {
            uid: Some(pod.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&pod.name, &params).await {
        Ok(_) => Ok(PodDeletion::Deleted),
        Err(kube::Error::Api(status)) if is_gone(&status) => Ok(PodDeletion::Gone),
        Err(source) => Err(Error::DeletePod {
            pod: pod.key(),
            source,
        }),
    }
}

/// The eviction of `pod`, naming its UID (when known) as a precondition.
pub(super) fn eviction_body(pod: &PodRef, grace_period_seconds: Option<u64>) -> EvictionBody {
    let grace = grace_period_seconds.map(|seconds| i64::try_from(seconds).unwrap_or(i64::MAX));
    let preconditions = (!pod.uid.is_empty()).then(|| Preconditions {
        uid: Some(pod.uid.clone()),
        resource_version: None,
    });
    EvictionBody {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            ..ObjectMeta::default()
        },
        delete_options: (preconditions.is_some() || grace.is_some()).then(|| DeleteOptions {
            preconditions,
            grace_period_seconds: grace,
            ..DeleteOptions::default()
        }),
    }
}

/// Whether an answer says the pod named is no more: 404, or a 409 for the UID precondition
/// (the name now belongs to another pod).
pub(super) fn is_gone(status: &Status) -> bool {
    status.code == 404 || (status.code == 409 && is_uid_precondition(&status.message))
}

/// The apiserver's wordings of a failed UID precondition: "Precondition failed: UID in
/// precondition: …" on a delete, "The object might have been deleted and then recreated" on an
/// eviction.
fn is_uid_precondition(message: &str) -> bool {
    message.contains("UID") && message.to_ascii_lowercase().contains("precondition")
}

/// The answer to a 429: the pod is gone after all (the name may now be another pod's), or
/// blocked by the budget the refusal names; a 429 naming none (the apiserver's own throttling,
/// or an older apiserver) is blocked by the budget that selects the pod, listed.
async fn blocked(
    client: &kube::Client,
    cache: Option<&ClusterCache>,
    node: Option<&str>,
    pod: &PodRef,
    status: Box<Status>,
) -> Result<Eviction> {
    let Some(found) = this_pod(client, cache, node, pod).await? else {
        return Ok(Eviction::Gone);
    };
    let pdb = match budget_named(&status) {
        Some(name) => named_budget(client, cache, &pod.namespace, name).await?,
        None => {
            let listed = namespace_budgets(client, &pod.namespace).await?;
            let labels = found.metadata.labels.clone().unwrap_or_default();
            budget_for(&listed, &labels).map(pdb_facts)
        }
    };
    Ok(Eviction::Blocked {
        pdb,
        message: status.message,
    })
}

/// The pod of `pod`'s UID, when it is still there: from the mirror of its Node (`node`, when
/// known) when it holds that very pod, else (not in sync, not seen yet, or another UID under
/// the name) read from the apiserver.
async fn this_pod(
    client: &kube::Client,
    cache: Option<&ClusterCache>,
    node: Option<&str>,
    pod: &PodRef,
) -> Result<Option<Arc<Pod>>> {
    let mirrored = cache
        .zip(node)
        .and_then(|(cache, node)| cache.pod_on(client, node, &pod.namespace, &pod.name))
        .flatten()
        .filter(|found| is_same_pod(found, pod));
    if mirrored.is_some() {
        return Ok(mirrored);
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let found = pods
        .get_opt(&pod.name)
        .await
        .map_err(|source| Error::GetPod {
            pod: pod.key(),
            source,
        })?;
    Ok(found.filter(|found| is_same_pod(found, pod)).map(Arc::new))
}

/// The facts of budget `namespace/name`: from the mirror when it is in sync, else read (none
/// when it is gone).
async fn named_budget(
    client: &kube::Client,
    cache: Option<&ClusterCache>,
    namespace: &str,
    name: &str,
) -> Result<Option<PdbFacts>> {
    if let Some(mirrored) = cache.and_then(|cache| cache.budget(client, namespace, name)) {
        return Ok(mirrored.map(|budget| pdb_facts(&budget)));
    }
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), namespace);
    let found = budgets
        .get_opt(name)
        .await
        .map_err(|source| Error::ListPdbs {
            namespace: namespace.to_owned(),
            source,
        })?;
    Ok(found.as_ref().map(pdb_facts))
}

/// The budget a 429 names in its `DisruptionBudget` cause: every message of the apiserver's
/// eviction begins "The disruption budget NAME …" ("needs 2 healthy pods and has 2 currently",
/// "is still being processed by the server", "does not allow evicting pods currently").
pub(super) fn budget_named(status: &Status) -> Option<&str> {
    status
        .details
        .as_ref()?
        .causes
        .iter()
        .filter(|cause| cause.reason == DISRUPTION_BUDGET_CAUSE)
        .find_map(|cause| cause.message.strip_prefix("The disruption budget "))
        .and_then(|rest| rest.split_whitespace().next())
        .filter(|name| !name.is_empty())
}

/// The budget among `budgets` that selects a pod with `labels`: one allowing no disruption
/// first, then by name (the apiserver refuses evictions of a pod with several).
pub(super) fn budget_for<'a>(
    budgets: &'a [PodDisruptionBudget],
    labels: &BTreeMap<String, String>,
) -> Option<&'a PodDisruptionBudget> {
    budgets
        .iter()
        .filter(|budget| selects(budget, labels))
        .min_by_key(|budget| {
            let allowed = budget.status.as_ref().and_then(|s| s.disruptions_allowed);
            (allowed.unwrap_or(0) > 0, budget.metadata.name.clone())
        })
}

/// Whether `budget` selects a pod with `labels`. In `policy/v1` an empty selector selects
/// every pod of the namespace and a missing one none; a selector that does not parse selects
/// none.
pub(super) fn selects(budget: &PodDisruptionBudget, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = budget.spec.as_ref().and_then(|s| s.selector.clone()) else {
        return false;
    };
    Selector::try_from(selector).is_ok_and(|selector| selector.matches(labels))
}

/// What the drain needs of a budget: its generation and status.
pub(super) fn pdb_facts(budget: &PodDisruptionBudget) -> PdbFacts {
    let status = budget.status.clone().unwrap_or_default();
    PdbFacts {
        namespace: budget.metadata.namespace.clone().unwrap_or_default(),
        name: budget.metadata.name.clone().unwrap_or_default(),
        generation: budget.metadata.generation,
        observed_generation: status.observed_generation,
        expected_pods: status.expected_pods.unwrap_or(0),
        current_healthy: status.current_healthy.unwrap_or(0),
        desired_healthy: status.desired_healthy.unwrap_or(0),
        disruptions_allowed: status.disruptions_allowed.unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn budget(name: &str, selector: Value, allowed: i32) -> PodDisruptionBudget {
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "shop", "generation": 3 },
            "spec": { "minAvailable": 2, "selector": selector },
            "status": {
                "observedGeneration": 3, "expectedPods": 2, "currentHealthy": 2,
                "desiredHealthy": 2, "disruptionsAllowed": allowed,
            },
        }))
        .unwrap_or_default()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_budget_reads_as_pdb_facts() {
        let facts = pdb_facts(&budget("web", json!({}), 0));
        assert_eq!(
            facts,
            PdbFacts {
                namespace: "shop".into(),
                name: "web".into(),
                generation: Some(3),
                observed_generation: Some(3),
                expected_pods: 2,
                current_healthy: 2,
                desired_healthy: 2,
                disruptions_allowed: 0,
            }
        );
        let fresh: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": { "name": "new", "namespace": "shop", "generation": 1 },
        }))
        .unwrap_or_default();
        assert_eq!(pdb_facts(&fresh).observed_generation, None);
    }

    #[test]
    fn selectors_match_as_the_apiserver_does() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let table = [
            (
                "matchLabels",
                json!({ "matchLabels": { "app": "web" } }),
                true,
            ),
            (
                "other labels",
                json!({ "matchLabels": { "app": "db" } }),
                false,
            ),
            (
                "In",
                json!({ "matchExpressions": [
                    { "key": "tier", "operator": "In", "values": ["front", "back"] } ] }),
                true,
            ),
            (
                "DoesNotExist",
                json!({ "matchExpressions": [ { "key": "tier", "operator": "DoesNotExist" } ] }),
                false,
            ),
            ("empty selects all", json!({}), true),
            ("missing selects none", Value::Null, false),
            (
                "unparsable selects none",
                json!({ "matchExpressions": [ { "key": "tier", "operator": "Near" } ] }),
                false,
            ),
        ];
        for (case, selector, expected) in table {
            assert_eq!(selects(&budget("b", selector, 0), &web), expected, "{case}");
        }
    }

    #[test]
    fn the_blocking_budget_is_preferred() {
        let web = labels(&[("app", "web")]);
        let budgets = [
            budget("a-other", json!({ "matchLabels": { "app": "db" } }), 0),
            budget("b-lenient", json!({ "matchLabels": { "app": "web" } }), 1),
            budget("c-strict", json!({ "matchLabels": { "app": "web" } }), 0),
        ];
        let chosen = budget_for(&budgets, &web).and_then(|b| b.metadata.name.as_deref());
        assert_eq!(chosen, Some("c-strict"));
        assert!(budget_for(&budgets, &labels(&[("app", "cache")])).is_none());
    }

    #[test]
    fn the_eviction_names_the_uid_in_delete_options() {
        let pod = PodRef {
            namespace: "shop".into(),
            name: "web-1".into(),
            uid: "u-1".into(),
            grace_period_seconds: 30,
        };
        let body = serde_json::to_value(eviction_body(&pod, None)).unwrap_or_default();
        assert_eq!(
            body,
            json!({
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": { "name": "web-1", "namespace": "shop" },
                "deleteOptions": { "preconditions": { "uid": "u-1" } },
            })
        );
        let trimmed = serde_json::to_value(eviction_body(&pod, Some(12))).unwrap_or_default();
        assert_eq!(
            trimmed["deleteOptions"],
            json!({ "preconditions": { "uid": "u-1" }, "gracePeriodSeconds": 12 })
        );
    }

    #[test]
    fn a_refusal_names_its_budget_in_its_cause() {
        let refusal = |reason: &str, message: &str| -> Status {
            serde_json::from_value(json!({
                "code": 429,
                "details": { "causes": [ { "reason": reason, "message": message } ] },
            }))
            .unwrap_or_default()
        };
        let table = [
            (
                refusal(
                    "DisruptionBudget",
                    "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
                ),
                Some("web-pdb"),
            ),
            (
                refusal(
                    "DisruptionBudget",
                    "The disruption budget web is still being processed by the server.",
                ),
                Some("web"),
            ),
            (
                refusal(
                    "DisruptionBudget",
                    "The disruption budget db does not allow evicting pods currently",
                ),
                Some("db"),
            ),
            (refusal("DisruptionBudget", "something else"), None),
            (
                refusal("FieldValueInvalid", "The disruption budget web needs 2"),
                None,
            ),
            (Status::default(), None),
        ];
        for (status, expected) in table {
            assert_eq!(budget_named(&status), expected, "{status:?}");
        }
    }

    #[test]
    fn a_uid_precondition_conflict_means_gone() {
        let status = |code: u16, message: &str| Status {
            code,
            message: message.to_owned(),
            ..Status::default()
        };
        let table = [
            (status(404, "pods \"web-1\" not found"), true),
            (
                status(
                    409,
                    "Operation cannot be fulfilled on Pod \"web-1\": Precondition failed: UID in precondition: u-1, UID in object meta: u-2",
                ),
                true,
            ),
            (
                status(
                    409,
                    "Operation cannot be fulfilled on pods \"web-1\": the object has been modified",
                ),
                false,
            ),
            (status(429, "Cannot evict pod"), false),
        ];
        for (status, expected) in table {
            assert_eq!(is_gone(&status), expected, "{}", status.message);
        }
    }
}
