//! CreateMachine's `label-node` activity against the real API server of the local stack: the
//! pool's taints are merged into the Node's, never replacing them. A Node registered with
//! startup taints keeps them; a taint removed from the template leaves the Node only when
//! nodewright recorded it as its own; a foreign taint with a template taint's key and another
//! effect stays; foreign labels and annotations stay while labels nodewright stops sending go;
//! the drain's taint and the metadata merge leave each other alone; a Node changed between the
//! read and the write is read again, and the other writer's change survives.
//!
//! Run with `cargo test -p nodewright-activities --test kube_nodes` after `dev/stack up`. The
//! kubeconfig comes from `KUBECONFIG`, or else from the stack's env file (`.run/env`); without
//! either the tests fail, saying the stack is needed.
//!
//! Every Node a test creates carries the label `nodewright.io/test-run=<suffix>`, unique per
//! test, and is deleted by that label at the end whether the test passed or not. They are not
//! kwok's (nothing heartbeats them), and their providerIDs name VMs of a made-up resource group,
//! so the sandbox's node joiner leaves them alone. The tests sit in a `#[cfg(test)]` module so
//! the tidy test sees them as test code.

#[cfg(test)]
mod stack;

#[cfg(test)]
mod kube_nodes {
    use std::collections::BTreeMap;
    use std::future::Future;
    use std::panic::AssertUnwindSafe;

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::FutureExt;
    use k8s_openapi::api::core::v1::Node;
    use kube::Api;
    use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};

    use nodewright_activities::kube::drain;
    use nodewright_activities::kube::nodes;
    use nodewright_activities::kube::{
        MachineNode, NodeChange, NodeMetadata, NodeTaint, PrepareDrain, PreparedNode,
    };
    use nodewright_model::taints::ANNOTATION_MANAGED_TAINTS;
    use serde_json::json;

    use super::stack::client;

    type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

    const RUN_LABEL: &str = "nodewright.io/test-run";
    const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule";
    const CILIUM: &str = "node.cilium.io/agent-not-ready=true:NoSchedule";
    const FOREIGN_DEDICATED: &str = "dedicated=db:NoExecute";
    const DRAINING: &str = "nodewright.io/draining=:NoSchedule";

    #[tokio::test]
    async fn startup_and_foreign_taints_survive_and_only_recorded_taints_are_removed() -> TestResult
    {
        let client = client().await?;
        let run = Run::new("meta");
        with_cleanup(&client, &run, merge_scenario(&client, &run)).await
    }

    async fn merge_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let name = run.name("web");
        create_node(
            client,
            run,
            &name,
            &[UNINITIALIZED, CILIUM, FOREIGN_DEDICATED],
        )
        .await?;
        let nodes: Api<Node> = Api::all(client.clone());

        // Create: the template's taints join the startup taints and the foreign one.
        let labels = [("role", "worker"), ("tier", "gpu")];
        let template = ["dedicated=gpu:NoSchedule", "gpu=true:NoExecute"];
        nodes::apply_metadata(client, &metadata(&name, &labels, &template)).await?;
        let node = nodes.get(&name).await?;
        assert_eq!(
            taint_strings(&node),
            [UNINITIALIZED, CILIUM, FOREIGN_DEDICATED]
                .into_iter()
                .chain(template)
                .collect::<Vec<_>>(),
            "the startup taints and the foreign dedicated:NoExecute are kept"
        );
        assert_eq!(
            annotation(&node, ANNOTATION_MANAGED_TAINTS).as_deref(),
            Some("dedicated:NoSchedule,gpu:NoExecute")
        );
        assert_eq!(label(&node, "role").as_deref(), Some("worker"));
        assert_eq!(
            label(&node, "nodewright.io/machine").as_deref(),
            Some(name.as_str())
        );
        assert_eq!(
            label(&node, "example.com/team").as_deref(),
            Some("payments")
        );
        assert_eq!(
            annotation(&node, "example.com/owner").as_deref(),
            Some("payments")
        );
        assert_eq!(
            annotation(&node, "nodewright.io/drain-policy").as_deref(),
            Some("{}")
        );

        // The same apply again changes nothing.
        nodes::apply_metadata(client, &metadata(&name, &labels, &template)).await?;
        assert_eq!(
            taint_strings(&nodes.get(&name).await?),
            taint_strings(&node)
        );

        // A taint and a label dropped from the template leave the Node; the rest stays.
        let labels = [("role", "worker")];
        let template = ["dedicated=tpu:NoSchedule"];
        nodes::apply_metadata(client, &metadata(&name, &labels, &template)).await?;
        let node = nodes.get(&name).await?;
        assert_eq!(
            taint_strings(&node),
            vec![
                UNINITIALIZED,
                CILIUM,
                FOREIGN_DEDICATED,
                "dedicated=tpu:NoSchedule"
            ],
            "gpu:NoExecute was recorded and is removed; dedicated:NoSchedule takes the new value"
        );
        assert_eq!(
            annotation(&node, ANNOTATION_MANAGED_TAINTS).as_deref(),
            Some("dedicated:NoSchedule")
        );
        assert_eq!(
            label(&node, "tier"),
            None,
            "a label nodewright stopped sending goes"
        );
        assert_eq!(
            label(&node, "example.com/team").as_deref(),
            Some("payments")
        );
        assert_eq!(
            label(&node, RUN_LABEL).as_deref(),
            Some(run.suffix.as_str())
        );
        assert_eq!(
            annotation(&node, "example.com/owner").as_deref(),
            Some("payments")
        );

        // The drain's taint and the metadata merge leave each other alone.
        let machine = MachineNode {
            node: name.clone(),
            vm_id: vm_id(&name),
        };
        let prepare = PrepareDrain {
            node: name.clone(),
            vm_id: vm_id(&name),
            terminating: false,
        };
        let prepared = drain::prepare_node(client, &prepare).await?;
        assert!(
            matches!(prepared, PreparedNode::Prepared { .. }),
            "{prepared:?}"
        );
        nodes::apply_metadata(client, &metadata(&name, &labels, &[])).await?;
        let node = nodes.get(&name).await?;
        assert_eq!(
            taint_strings(&node),
            vec![UNINITIALIZED, CILIUM, FOREIGN_DEDICATED, DRAINING],
            "the drain's taint stays; the last template taint goes"
        );
        assert_eq!(annotation(&node, ANNOTATION_MANAGED_TAINTS), None);
        assert_eq!(
            drain::uncordon_node(client, &machine).await?,
            NodeChange::Done
        );
        assert_eq!(
            taint_strings(&nodes.get(&name).await?),
            vec![UNINITIALIZED, CILIUM, FOREIGN_DEDICATED]
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_cordon_says_whether_the_node_was_cordoned_already() -> TestResult {
        let client = client().await?;
        let run = Run::new("cordon");
        with_cleanup(&client, &run, cordon_scenario(&client, &run)).await
    }

    /// `--skip-drain`'s cordon tells a Node it cordoned from one that was cordoned before, so that
    /// a cancelled delete gives back only what it changed.
    async fn cordon_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let name = run.name("web");
        create_node(client, run, &name, &[]).await?;
        nodes::apply_metadata(client, &metadata(&name, &[], &[])).await?;
        let machine = MachineNode {
            node: name.clone(),
            vm_id: vm_id(&name),
        };
        assert_eq!(nodes::cordon(client, &machine).await?, NodeChange::Done);
        let node: Node = Api::all(client.clone()).get(&name).await?;
        assert_eq!(node.spec.and_then(|s| s.unschedulable), Some(true));
        assert_eq!(nodes::cordon(client, &machine).await?, NodeChange::Already);
        let foreign = MachineNode {
            node: name.clone(),
            vm_id: vm_id("another-vm"),
        };
        assert_eq!(nodes::cordon(client, &foreign).await?, NodeChange::NotOurs);
        Ok(())
    }

    #[tokio::test]
    async fn a_node_changed_between_read_and_write_is_read_again_and_the_change_kept() -> TestResult
    {
        let client = client().await?;
        let run = Run::new("race");
        with_cleanup(&client, &run, race_scenario(&client, &run)).await
    }

    async fn race_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let name = run.name("web");
        create_node(client, run, &name, &[UNINITIALIZED]).await?;
        // A client whose first taint write (a merge patch of the Node) is preceded by another
        // writer's: it adds a taint to the Node the activity has just read.
        let merge_patches = Arc::new(AtomicUsize::new(0));
        let meddling = {
            let real = client.clone();
            let node = name.clone();
            let merge_patches = merge_patches.clone();
            tower::service_fn(move |request: http::Request<kube::client::Body>| {
                let real = real.clone();
                let node = node.clone();
                let merge_patches = merge_patches.clone();
                async move {
                    let is_taint_write = request.method() == http::Method::PATCH
                        && request.uri().path() == format!("/api/v1/nodes/{node}")
                        && request
                            .headers()
                            .get(http::header::CONTENT_TYPE)
                            .is_some_and(|value| value == "application/merge-patch+json");
                    if is_taint_write && merge_patches.fetch_add(1, Ordering::SeqCst) == 0 {
                        add_taint(&real, &node, "example.com/late", "NoExecute").await?;
                    }
                    real.send(request).await.map_err(TestError::from)
                }
            })
        };
        let meddled = kube::Client::new(meddling, "default");
        let template = ["dedicated=gpu:NoSchedule"];
        nodes::apply_metadata(&meddled, &metadata(&name, &[], &template)).await?;
        // At least two: the node-lifecycle controller may add its not-ready taint meanwhile too.
        let writes = merge_patches.load(Ordering::SeqCst);
        assert!(
            writes >= 2,
            "the first write met a conflict and was made again ({writes} writes)"
        );
        let node = Api::<Node>::all(client.clone()).get(&name).await?;
        assert_eq!(
            taint_strings(&node),
            vec![
                UNINITIALIZED,
                "example.com/late=true:NoExecute",
                "dedicated=gpu:NoSchedule"
            ],
            "the other writer's taint is not lost"
        );
        assert_eq!(
            annotation(&node, ANNOTATION_MANAGED_TAINTS).as_deref(),
            Some("dedicated:NoSchedule")
        );
        Ok(())
    }

    // ---- helpers ------------------------------------------------------------------------

    type TestError = Box<dyn std::error::Error + Send + Sync>;

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

    fn vm_id(name: &str) -> String {
        format!(
            "/subscriptions/s/resourceGroups/rg-nwt-tests/providers/Microsoft.Compute/virtualMachines/{name}"
        )
    }

    /// `key=value:effect` → a taint.
    fn node_taint(text: &str) -> NodeTaint {
        let (key_value, effect) = text.rsplit_once(':').unwrap_or((text, ""));
        let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
        NodeTaint {
            key: key.to_owned(),
            value: value.to_owned(),
            effect: effect.to_owned(),
        }
    }

    /// What CreateMachine's `label-node` sends for machine `name`: nodewright's labels and
    /// `labels`, the drain policy annotation, `taints`.
    fn metadata(name: &str, labels: &[(&str, &str)], taints: &[&str]) -> NodeMetadata {
        let mut all_labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        all_labels.insert("nodewright.io/pool".to_owned(), "web".to_owned());
        all_labels.insert("nodewright.io/machine".to_owned(), name.to_owned());
        all_labels.insert("nodewright.io/template".to_owned(), "7f3a9c".to_owned());
        NodeMetadata {
            node: name.to_owned(),
            labels: all_labels,
            taints: taints.iter().copied().map(node_taint).collect(),
            annotations: BTreeMap::from([(
                "nodewright.io/drain-policy".to_owned(),
                "{}".to_owned(),
            )]),
        }
    }

    /// A Node as a kubelet registers it: providerID, its own labels, `taints` (no
    /// `nodewright.io/machine` label yet), plus a label and an annotation of another controller.
    async fn create_node(
        client: &kube::Client,
        run: &Run,
        name: &str,
        taints: &[&str],
    ) -> TestResult {
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "example.com/team": "payments",
                    RUN_LABEL: run.suffix,
                },
                "annotations": { "example.com/owner": "payments" },
            },
            "spec": {
                "providerID": format!("azure://{}", vm_id(name)),
                "taints": taints.iter().copied().map(node_taint).collect::<Vec<_>>(),
            },
        }))?;
        Api::<Node>::all(client.clone())
            .create(&PostParams::default(), &node)
            .await?;
        Ok(())
    }

    /// Another writer's read-modify-write: appends `key=true:effect` to the Node's taints.
    async fn add_taint(client: &kube::Client, name: &str, key: &str, effect: &str) -> TestResult {
        let nodes: Api<Node> = Api::all(client.clone());
        let node = nodes.get(name).await?;
        let mut taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
        taints.push(serde_json::from_value(
            json!({ "key": key, "value": "true", "effect": effect }),
        )?);
        let patch = json!({ "spec": { "taints": taints } });
        let params = PatchParams {
            field_manager: Some("another-controller".to_owned()),
            ..PatchParams::default()
        };
        nodes.patch(name, &params, &Patch::Merge(&patch)).await?;
        Ok(())
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

    fn label(node: &Node, key: &str) -> Option<String> {
        node.metadata.labels.as_ref()?.get(key).cloned()
    }

    fn annotation(node: &Node, key: &str) -> Option<String> {
        node.metadata.annotations.as_ref()?.get(key).cloned()
    }
}
