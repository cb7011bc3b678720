//! The rolling update's Kubernetes activities against the real API server of the local stack:
//! listing a pool's Nodes by label, and tainting the outdated ones (and clearing that taint)
//! without touching other taints or Nodes that are not the machine's.
//!
//! Run with `cargo test -p nodewright-activities --test kube_pool` after `dev/stack up`. The
//! kubeconfig comes from `KUBECONFIG`, or else from the stack's env file (`.run/env`); without
//! either the tests fail, saying the stack is needed.
//!
//! Every Node a test creates carries the label `nodewright.io/test-run=<suffix>`, unique per
//! test, and is deleted by that label at the end whether the test passed or not. Their
//! providerIDs name VMs of a made-up resource group, so the sandbox's node joiner leaves them
//! alone. The tests sit in a `#[cfg(test)]` module so the tidy test sees them as test code.

#[cfg(test)]
mod stack;

#[cfg(test)]
mod kube_pool {
    use std::future::Future;
    use std::panic::AssertUnwindSafe;

    use std::time::{Duration, Instant};

    use futures::FutureExt;
    use k8s_openapi::api::core::v1::Node;
    use kube::Api;
    use kube::api::{DeleteParams, ListParams, PostParams};

    use nodewright_activities::kube::pool::{self, FIELD_MANAGER};
    use nodewright_activities::kube::{ListPoolNodes, MachineNode, MarkOutdated, MarkedOutdated};
    use nodewright_model::rollout::PoolNode;
    use serde_json::{Value, json};

    use super::stack::client;

    type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

    const WAIT: Duration = Duration::from_secs(90);
    const POLL: Duration = Duration::from_millis(250);
    const RUN_LABEL: &str = "nodewright.io/test-run";
    const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";
    const OUTDATED: &str = "nodewright.io/outdated=:PreferNoSchedule";

    #[tokio::test]
    async fn pool_nodes_are_listed_and_marked_outdated_and_cleared_keeping_other_taints()
    -> TestResult {
        let client = client().await?;
        let run = Run::new("pool");
        with_cleanup(&client, &run, pool_scenario(&client, &run)).await
    }

    async fn pool_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let pool_name = run.name("web");
        let ready = run.name("ready");
        let not_ready = run.name("notready");
        let foreign = run.name("foreign");
        let other_pool = run.name("otherpool");
        create_node(
            client,
            run,
            &NodeSpec {
                taints: json!([{ "key": "dedicated", "value": "db", "effect": "NoSchedule" }]),
                ..NodeSpec::of(&ready, &pool_name)
            },
        )
        .await?;
        create_node(
            client,
            run,
            &NodeSpec {
                kwok: false,
                ..NodeSpec::of(&not_ready, &pool_name)
            },
        )
        .await?;
        create_node(
            client,
            run,
            &NodeSpec {
                provider_vm: run.name("other-vm"),
                taints: json!([{ "key": "nodewright.io/draining", "effect": "NoSchedule" }]),
                ..NodeSpec::of(&foreign, &pool_name)
            },
        )
        .await?;
        create_node(client, run, &NodeSpec::of(&other_pool, &run.name("db"))).await?;
        await_ready(client, &ready).await?;

        // Listing: the pool's three Nodes, by name, read as they are.
        let list = ListPoolNodes {
            pool: pool_name.clone(),
            lease_timeout_secs: None,
        };
        let listed = pool::list_pool_nodes(client, &list).await?;
        let names: Vec<&str> = listed.iter().map(|n| n.name.as_str()).collect();
        let mut expected = vec![foreign.as_str(), not_ready.as_str(), ready.as_str()];
        expected.sort_unstable();
        assert_eq!(names, expected, "sorted, and only the pool's");
        let by_name = |name: &str| -> TestResult<PoolNode> {
            listed
                .iter()
                .find(|n| n.name == name)
                .cloned()
                .ok_or_else(|| format!("{name} not listed").into())
        };
        let first = by_name(&ready)?;
        assert!(first.ready);
        assert!(first.ready_since > 0, "{first:?}");
        assert_eq!(first.provider_id, format!("azure://{}", vm_id(&ready)));
        assert!(!first.draining && !first.tainted_outdated, "{first:?}");
        assert!(!by_name(&not_ready)?.ready);
        assert!(by_name(&foreign)?.draining, "the draining taint is read");

        // Marking: the machines' Nodes are tainted, the foreign one and the absent one reported.
        let absent = run.name("absent");
        let machines: Vec<MachineNode> = [&ready, &not_ready, &foreign, &absent]
            .into_iter()
            .map(|name| MachineNode {
                node: name.clone(),
                vm_id: vm_id(name),
            })
            .collect();
        let mark = |outdated| MarkOutdated {
            nodes: machines.clone(),
            outdated,
        };
        let reported = |changed: Vec<&String>| MarkedOutdated {
            changed: changed.into_iter().cloned().collect(),
            absent: vec![absent.clone()],
            not_ours: vec![foreign.clone()],
        };
        assert_eq!(
            pool::mark_outdated(client, &mark(true)).await?,
            reported(vec![&ready, &not_ready])
        );
        let nodes: Api<Node> = Api::all(client.clone());
        let marked = nodes.get(&ready).await?;
        assert_eq!(
            taint_strings(&marked),
            vec!["dedicated=db:NoSchedule", OUTDATED],
            "the user's taint is kept"
        );
        assert_eq!(taint_strings(&nodes.get(&not_ready).await?), vec![OUTDATED]);
        let untouched = nodes.get(&foreign).await?;
        assert_eq!(
            taint_strings(&untouched),
            vec!["nodewright.io/draining=:NoSchedule"]
        );
        assert!(
            !written_by_rollout(&untouched),
            "{FIELD_MANAGER} never wrote the foreign Node"
        );
        let listed = pool::list_pool_nodes(client, &list).await?;
        let outdated: Vec<&str> = listed
            .iter()
            .filter(|n| n.tainted_outdated)
            .map(|n| n.name.as_str())
            .collect();
        let mut expected = vec![not_ready.as_str(), ready.as_str()];
        expected.sort_unstable();
        assert_eq!(outdated, expected);

        // Marking again changes nothing.
        assert_eq!(
            pool::mark_outdated(client, &mark(true)).await?,
            reported(vec![])
        );
        assert_eq!(
            taint_strings(&nodes.get(&ready).await?),
            vec!["dedicated=db:NoSchedule", OUTDATED]
        );

        // Clearing removes only the outdated taint; clearing again changes nothing.
        assert_eq!(
            pool::mark_outdated(client, &mark(false)).await?,
            reported(vec![&ready, &not_ready])
        );
        assert_eq!(
            taint_strings(&nodes.get(&ready).await?),
            vec!["dedicated=db:NoSchedule"]
        );
        assert!(taint_strings(&nodes.get(&not_ready).await?).is_empty());
        assert_eq!(
            taint_strings(&nodes.get(&foreign).await?),
            vec!["nodewright.io/draining=:NoSchedule"]
        );
        assert_eq!(
            pool::mark_outdated(client, &mark(false)).await?,
            reported(vec![])
        );
        let listed = pool::list_pool_nodes(client, &list).await?;
        assert!(listed.iter().all(|n| !n.tainted_outdated), "{listed:?}");
        Ok(())
    }

    // ---- helpers ------------------------------------------------------------------------

    /// Runs `scenario`, then deletes the run's Nodes whether it passed, failed or panicked (an
    /// assertion), and answers as the scenario did.
    async fn with_cleanup(
        client: &kube::Client,
        run: &Run,
        scenario: impl Future<Output = TestResult>,
    ) -> TestResult {
        let outcome = AssertUnwindSafe(scenario).catch_unwind().await;
        run.clean(client).await;
        match outcome {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// One test's Nodes: names with a unique suffix, all labelled for cleanup.
    struct Run {
        tag: &'static str,
        suffix: String,
    }

    impl Run {
        fn new(tag: &'static str) -> Self {
            let suffix = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
            Self { tag, suffix }
        }

        fn name(&self, what: &str) -> String {
            format!("nwt-{}-{what}-{}", self.tag, self.suffix)
        }

        /// Deletes every Node labelled with this run, logging (not failing on) errors.
        async fn clean(&self, client: &kube::Client) {
            let nodes: Api<Node> = Api::all(client.clone());
            let selector = ListParams::default().labels(&format!("{RUN_LABEL}={}", self.suffix));
            let listed = match nodes.list(&selector).await {
                Ok(listed) => listed,
                Err(error) => return eprintln!("cleanup: listing: {error}"),
            };
            for node in listed.items {
                let name = node.metadata.name.unwrap_or_default();
                if let Err(error) = nodes.delete(&name, &DeleteParams::default()).await {
                    eprintln!("cleanup: deleting {name}: {error}");
                }
            }
        }
    }

    /// A Node of a pool as a test wants it.
    struct NodeSpec {
        name: String,
        pool: String,
        /// The VM its providerID names.
        provider_vm: String,
        /// Whether kwok manages it (heartbeats and makes it Ready).
        kwok: bool,
        taints: Value,
    }

    impl NodeSpec {
        /// A Node of machine `name` in `pool`: providerID and label name the machine.
        fn of(name: &str, pool: &str) -> Self {
            Self {
                name: name.to_owned(),
                pool: pool.to_owned(),
                provider_vm: name.to_owned(),
                kwok: true,
                taints: json!([]),
            }
        }
    }

    fn vm_id(name: &str) -> String {
        format!(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{name}"
        )
    }

    async fn create_node(client: &kube::Client, run: &Run, spec: &NodeSpec) -> TestResult {
        let annotations = if spec.kwok {
            json!({ KWOK_ANNOTATION: "fake" })
        } else {
            json!({})
        };
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": spec.name,
                "labels": {
                    "kubernetes.io/hostname": spec.name,
                    "kubernetes.io/os": "linux",
                    "type": "kwok",
                    "nodewright.io/pool": spec.pool,
                    "nodewright.io/machine": spec.name,
                    RUN_LABEL: run.suffix,
                },
                "annotations": annotations,
            },
            "spec": {
                "providerID": format!("azure://{}", vm_id(&spec.provider_vm)),
                "taints": spec.taints,
            },
            "status": {
                "capacity": { "cpu": "4", "memory": "16Gi", "pods": "110" },
                "allocatable": { "cpu": "4", "memory": "16Gi", "pods": "110" },
            },
        }))?;
        Api::<Node>::all(client.clone())
            .create(&PostParams::default(), &node)
            .await?;
        Ok(())
    }

    async fn await_ready(client: &kube::Client, name: &str) -> TestResult {
        let nodes: Api<Node> = Api::all(client.clone());
        let started = Instant::now();
        loop {
            let node = nodes.get(name).await?;
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                return Ok(());
            }
            if started.elapsed() > WAIT {
                return Err(format!("timed out waiting for kwok to make {name} Ready").into());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The Node's taints as `key=value:effect`, without the ones Kubernetes' own controllers
    /// manage (`node.kubernetes.io/not-ready`, `unreachable`, ...).
    fn taint_strings(node: &Node) -> Vec<String> {
        node.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter(|t| !t.key.starts_with("node.kubernetes.io/"))
            .map(|t| {
                format!(
                    "{}={}:{}",
                    t.key,
                    t.value.clone().unwrap_or_default(),
                    t.effect
                )
            })
            .collect()
    }

    /// Whether the rollout's field manager has written the Node's spec.
    fn written_by_rollout(node: &Node) -> bool {
        node.metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|f| f.manager.as_deref() == Some(FIELD_MANAGER) && f.subresource.is_none())
    }
}
