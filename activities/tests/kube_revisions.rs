//! A pool's revisions ConfigMap against the real API server of the local stack: absent at
//! first, created labelled as nodewright's by the first write, a start and an end recorded, two
//! writers at once both kept (the `resourceVersion` read turns the later write into a conflict,
//! which reads again), and a ConfigMap of that name without nodewright's label never written.
//!
//! Run with `cargo test -p nodewright-activities --test kube_revisions` after `dev/stack up`.
//! The kubeconfig comes from `KUBECONFIG`, or else from the stack's env file (`.run/env`);
//! without either the test fails, saying the stack is needed. It works in a namespace of its own
//! (`nwt-rev-<suffix>`), deleted at the end whether it passed or not. The test sits in a
//! `#[cfg(test)]` module so the tidy test sees it as test code.

#[cfg(test)]
mod stack;

#[cfg(test)]
mod kube_revisions {
    use std::collections::BTreeMap;

    use futures::FutureExt;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::Api;
    use kube::api::{DeleteParams, ObjectMeta, PostParams};

    use nodewright_activities::kube::Error;
    use nodewright_activities::kube::revisions::{self, ReadRevisions, RecordRevision};
    use nodewright_model::pool::from_yaml;
    use nodewright_model::rollout::revisions::{LABEL_MANAGED_BY, MANAGED_BY, config_map_name};
    use nodewright_model::rollout::{
        RevisionChange, RevisionOutcome, Revisions, RolloutEnd, RolloutStart, StoredRevisions,
    };

    use super::stack::client;

    type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

    #[tokio::test]
    async fn revisions_are_created_recorded_kept_under_concurrent_writes_and_never_foreign()
    -> TestResult {
        let client = client().await?;
        let suffix = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        let namespace = format!("nwt-rev-{suffix}");
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let object: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": namespace }
        }))?;
        namespaces.create(&PostParams::default(), &object).await?;
        let outcome = std::panic::AssertUnwindSafe(scenario(&client, &namespace))
            .catch_unwind()
            .await;
        if let Err(error) = namespaces
            .delete(&namespace, &DeleteParams::default())
            .await
        {
            eprintln!("cleanup: deleting namespace {namespace}: {error}");
        }
        match outcome {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    async fn scenario(client: &kube::Client, namespace: &str) -> TestResult {
        let pool = "web";
        let read = |pool: &str| ReadRevisions {
            pool: pool.to_owned(),
        };
        let absent = revisions::read(client, namespace, &read(pool)).await?;
        assert_eq!(absent.stored, StoredRevisions::Absent);
        assert_eq!(
            absent.config_map,
            format!("{namespace}/nodewright-revisions-web")
        );

        // A start creates the ConfigMap, labelled; the end records the outcome.
        let first = start("aaa", 10);
        let recorded = record(client, namespace, RevisionChange::Started(first.clone())).await?;
        assert_eq!(recorded.number, 1);
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let created = config_maps.get(&config_map_name(pool)).await?;
        let labels = created.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get(LABEL_MANAGED_BY).map(String::as_str),
            Some(MANAGED_BY)
        );
        assert_eq!(
            labels.get("nodewright.io/pool").map(String::as_str),
            Some(pool)
        );
        let end = RolloutEnd {
            start: first,
            outcome: RevisionOutcome::Completed,
            at: 20,
        };
        record(client, namespace, RevisionChange::Ended(end)).await?;
        let after = parsed(client, namespace, pool).await?;
        let current = after.current().ok_or("no current revision")?;
        assert_eq!(
            (current.number, current.outcome, current.ended_at),
            (1, RevisionOutcome::Completed, Some(20))
        );

        // Two writers at once: both revisions are kept, numbered 2 and 3 in some order.
        let (b, c) = futures::join!(
            record(client, namespace, RevisionChange::Started(start("bbb", 30))),
            record(client, namespace, RevisionChange::Started(start("ccc", 31))),
        );
        let mut numbers = vec![b?.number, c?.number];
        numbers.sort_unstable();
        assert_eq!(numbers, [2, 3]);
        let after = parsed(client, namespace, pool).await?;
        let hashes: Vec<&str> = after
            .entries
            .iter()
            .map(|e| e.template_hash.as_str())
            .collect();
        assert_eq!(hashes.len(), 3, "{hashes:?}");

        // A ConfigMap of that name that is not nodewright's is never written.
        let foreign = ConfigMap {
            metadata: ObjectMeta {
                name: Some(config_map_name("other")),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("note".to_owned(), "mine".to_owned())])),
            ..ConfigMap::default()
        };
        config_maps.create(&PostParams::default(), &foreign).await?;
        let refused = revisions::record(
            client,
            namespace,
            &RecordRevision {
                pool: "other".to_owned(),
                change: RevisionChange::Started(start("aaa", 40)),
            },
        )
        .await;
        let Err(Error::Revisions(error)) = refused else {
            panic!("a foreign ConfigMap was not refused: {refused:?}");
        };
        assert!(error.to_string().contains("is not nodewright's"), "{error}");
        let kept = config_maps.get(&config_map_name("other")).await?;
        assert_eq!(kept.data, foreign.data, "the foreign ConfigMap was changed");
        let stored = revisions::read(client, namespace, &read("other")).await?;
        assert_eq!(stored.stored, StoredRevisions::Foreign);
        Ok(())
    }

    fn start(hash: &str, at: i64) -> RolloutStart {
        let mut pool = from_yaml(include_str!("../../examples/pools/workers.yaml"))
            .unwrap_or_else(|e| panic!("{e}"));
        pool.name = "web".to_owned();
        pool.template_hash = hash.to_owned();
        RolloutStart {
            pool,
            workflow_id: "rollout/dev/web".to_owned(),
            run_id: format!("run-{at}"),
            rollback: false,
            at,
        }
    }

    async fn record(
        client: &kube::Client,
        namespace: &str,
        change: RevisionChange,
    ) -> TestResult<revisions::RevisionRecorded> {
        let input = RecordRevision {
            pool: "web".to_owned(),
            change,
        };
        Ok(revisions::record(client, namespace, &input).await?)
    }

    async fn parsed(client: &kube::Client, namespace: &str, pool: &str) -> TestResult<Revisions> {
        let read = ReadRevisions {
            pool: pool.to_owned(),
        };
        Ok(revisions::read(client, namespace, &read)
            .await?
            .revisions()?)
    }
}
