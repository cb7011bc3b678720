//! The drain's Kubernetes activities against the real API server of the local stack: preparing
//! and uncordoning kwok-managed Nodes, listing their pods, evicting and deleting pods, and the
//! waits on pods and VolumeAttachments.
//!
//! Run with `cargo test -p nodewright-activities --test kube_drain` after `dev/stack up`. The
//! kubeconfig comes from `KUBECONFIG`, or else from the stack's env file (`.run/env`); without
//! either the tests fail, saying the stack is needed.
//!
//! Every object a test creates carries the label `nodewright.io/test-run=<suffix>`, unique per
//! test, and is deleted by that label at the end whether the test passed or not. Hand-made
//! VolumeAttachments name a fake attacher and PersistentVolumes a fake CSI driver, so neither
//! the sandbox's disk attacher nor anything else acts on them. The tests sit in a
//! `#[cfg(test)]` module so the tidy test sees them as test code.

#[cfg(test)]
mod stack;

#[cfg(test)]
mod kube_drain {
    use std::future::Future;
    use std::panic::AssertUnwindSafe;

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use chrono::Utc;
    use futures::FutureExt;
    use k8s_openapi::api::apps::v1::DaemonSet;
    use k8s_openapi::api::core::v1::{
        Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ServiceAccount,
    };
    use k8s_openapi::api::events::v1::Event;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::storage::v1::VolumeAttachment;
    use kube::Api;
    use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};

    use nodewright_activities::kube::cache::ClusterCache;
    use nodewright_activities::kube::drain::{self, Heartbeat};
    use nodewright_activities::kube::events::record_node_event;
    use nodewright_activities::kube::{
        AwaitPodsGone, AwaitVolumes, EventRecorded, Eviction, ListNodePods, MachineNode,
        NodeAttachments, NodeChange, NodeEvent, PodAction, PodDeletion, PrepareDrain, PreparedNode,
        Reattached,
    };
    use nodewright_model::drain::{
        LocalDataPod, LocalDataPolicy, PodRef, SkipReason, TrackedVolume, VolumeFacts, VolumeWait,
        is_misconfigured, plan_drain,
    };
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::stack::client;

    type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

    const WAIT: Duration = Duration::from_secs(90);
    const POLL: Duration = Duration::from_millis(250);
    const RUN_LABEL: &str = "nodewright.io/test-run";
    const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";
    const FAKE_ATTACHER: &str = "fake-attacher.nodewright.test";
    const TEST_DRIVER: &str = "test.example.com";
    const HOLD_FINALIZER: &str = "nodewright.test/hold";

    // ---- prepare and uncordon -----------------------------------------------------------

    #[tokio::test]
    async fn prepare_cordons_taints_and_marks_terminating_and_uncordon_undoes_it() -> TestResult {
        let client = client().await?;
        let run = Run::new("prep");
        with_cleanup(&client, &run, prepare_scenario(&client, &run)).await
    }

    async fn prepare_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let name = run.name("node");
        let node = NodeSpec {
            taints: json!([{ "key": "dedicated", "value": "db", "effect": "NoSchedule" }]),
            annotations: json!({ "nodewright.io/drain-policy": "{\"timeout\":600}" }),
            ..NodeSpec::ours(&name)
        };
        create_ready_node(client, run, &node).await?;
        let input = PrepareDrain {
            node: name.clone(),
            vm_id: vm_id(&name),
            terminating: true,
        };
        let prepared = drain::prepare_node(client, &input).await?;
        let PreparedNode::Prepared {
            policy_annotation,
            policy_stamp,
            health,
            cordoned_before,
        } = prepared
        else {
            return Err(format!("expected Prepared, got {prepared:?}").into());
        };
        assert!(
            !cordoned_before,
            "the Node was schedulable before the drain"
        );
        assert_eq!(policy_annotation.as_deref(), Some("{\"timeout\":600}"));
        assert_eq!(policy_stamp, None, "a Node without a stamp reads none");
        assert_eq!(health.ready.map(|c| c.status).as_deref(), Some("True"));

        let nodes: Api<Node> = Api::all(client.clone());
        let first = nodes.get(&name).await?;
        assert_eq!(unschedulable(&first), Some(true));
        assert_eq!(
            taint_strings(&first),
            vec![
                "dedicated=db:NoSchedule",
                "nodewright.io/draining=:NoSchedule"
            ]
        );
        let condition = terminating(&first).ok_or("no Terminating condition")?;
        assert_eq!(condition["status"], "True");
        assert_eq!(condition["reason"], "ScaleDown");
        assert_eq!(condition["message"], drain::TERMINATING_MESSAGE);
        let ready = first
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        assert!(ready, "the other conditions are kept");

        // A second prepare writes no spec and moves only the condition's heartbeat.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        // A rerun finds its own cordon (with the draining taint): not someone else's.
        assert!(matches!(
            drain::prepare_node(client, &input).await?,
            PreparedNode::Prepared {
                cordoned_before: false,
                ..
            }
        ));
        let second = nodes.get(&name).await?;
        assert_eq!(taint_strings(&second), taint_strings(&first));
        assert_eq!(spec_written_at(&second), spec_written_at(&first));
        let again = terminating(&second).ok_or("no Terminating condition")?;
        assert_eq!(again["lastTransitionTime"], condition["lastTransitionTime"]);
        assert_ne!(again["lastHeartbeatTime"], condition["lastHeartbeatTime"]);

        let machine = MachineNode {
            node: name.clone(),
            vm_id: vm_id(&name),
        };
        assert_eq!(
            drain::uncordon_node(client, &machine).await?,
            NodeChange::Done
        );
        let uncordoned = nodes.get(&name).await?;
        assert_ne!(unschedulable(&uncordoned), Some(true));
        assert_eq!(taint_strings(&uncordoned), vec!["dedicated=db:NoSchedule"]);
        assert!(terminating(&uncordoned).is_none());
        // A second uncordon finds nothing to undo. (Whether it wrote cannot be told from
        // managedFields here: the node lifecycle controller takes the atomic taint list over
        // when it drops `node.kubernetes.io/unschedulable`.)
        assert_eq!(
            drain::uncordon_node(client, &machine).await?,
            NodeChange::Done
        );
        let again = nodes.get(&name).await?;
        assert_ne!(unschedulable(&again), Some(true));
        assert_eq!(taint_strings(&again), vec!["dedicated=db:NoSchedule"]);
        assert!(terminating(&again).is_none());
        Ok(())
    }

    #[tokio::test]
    async fn prepare_and_uncordon_leave_other_machines_nodes_alone() -> TestResult {
        let client = client().await?;
        let run = Run::new("foreign");
        with_cleanup(&client, &run, foreign_scenario(&client, &run)).await
    }

    async fn foreign_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let other_vm = run.name("other-vm");
        let foreign = run.name("foreign");
        create_node(
            client,
            run,
            &NodeSpec {
                provider_vm: other_vm.clone(),
                ..NodeSpec::ours(&foreign)
            },
        )
        .await?;
        let unlabelled = run.name("unlabelled");
        create_node(
            client,
            run,
            &NodeSpec {
                machine_label: None,
                ..NodeSpec::ours(&unlabelled)
            },
        )
        .await?;
        let prepare = |node: &str| PrepareDrain {
            node: node.to_owned(),
            vm_id: vm_id(node),
            terminating: true,
        };
        assert_eq!(
            drain::prepare_node(client, &prepare(&foreign)).await?,
            PreparedNode::NotOurs {
                provider_id: Some(format!("azure://{}", vm_id(&other_vm))),
            }
        );
        assert!(matches!(
            drain::prepare_node(client, &prepare(&unlabelled)).await?,
            PreparedNode::NotOurs {
                provider_id: Some(_)
            }
        ));
        assert_eq!(
            drain::prepare_node(client, &prepare(&run.name("absent"))).await?,
            PreparedNode::Absent
        );
        let nodes: Api<Node> = Api::all(client.clone());
        for name in [&foreign, &unlabelled] {
            let node = nodes.get(name).await?;
            assert_ne!(unschedulable(&node), Some(true), "{name} was cordoned");
            assert!(taint_strings(&node).is_empty(), "{name} was tainted");
            assert!(terminating(&node).is_none(), "{name} was marked");
        }

        // A Node cordoned by someone else is not uncordoned for the wrong machine.
        let cordon = json!({ "spec": { "unschedulable": true } });
        nodes
            .patch(&foreign, &PatchParams::default(), &Patch::Merge(&cordon))
            .await?;
        let machine = MachineNode {
            node: foreign.clone(),
            vm_id: vm_id(&foreign),
        };
        assert_eq!(
            drain::uncordon_node(client, &machine).await?,
            NodeChange::NotOurs
        );
        assert_eq!(unschedulable(&nodes.get(&foreign).await?), Some(true));
        let absent = MachineNode {
            node: run.name("absent"),
            vm_id: vm_id(&run.name("absent")),
        };
        assert_eq!(
            drain::uncordon_node(client, &absent).await?,
            NodeChange::Absent
        );
        Ok(())
    }

    // ---- listing pods -------------------------------------------------------------------

    #[tokio::test]
    async fn list_node_pods_classifies_a_daemonset_pod_and_resolves_a_claim_to_its_volume()
    -> TestResult {
        let client = client().await?;
        let run = Run::new("list");
        with_cleanup(&client, &run, list_scenario(&client, &run)).await
    }

    async fn list_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let node = run.name("node");
        create_ready_node(client, run, &NodeSpec::ours(&node)).await?;
        let namespace = run.name("ns");
        create_namespace(client, run, &namespace).await?;
        let volume = run.name("pv");
        create_volume_and_claim(client, run, &namespace, &volume).await?;
        // The disk-like volume is attached to the node (a VolumeAttachment of the fake attacher;
        // the test driver has no CSIDriver, so it attaches anyway); an NFS share used
        // ReadWriteMany needs no attach.
        create_attachment(
            client,
            run,
            &run.name("va-list"),
            &node,
            &volume,
            true,
            false,
        )
        .await?;
        let share = run.name("nfs");
        create_nfs_volume_and_claim(client, run, &namespace, &share).await?;
        let daemon_set: DaemonSet = parse(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": { "name": "agent", "labels": { RUN_LABEL: run.suffix } },
            "spec": {
                "selector": { "matchLabels": { "app": "agent" } },
                "template": {
                    "metadata": { "labels": { "app": "agent" } },
                    "spec": {
                        "nodeSelector": { "kubernetes.io/hostname": node },
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{ "name": "agent", "image": "registry.k8s.io/pause:3.10" }],
                    },
                },
            },
        }))?;
        Api::<DaemonSet>::namespaced(client.clone(), &namespace)
            .create(&PostParams::default(), &daemon_set)
            .await?;
        let mut db = pod_body("db-0", &node, json!({ "app": "db" }));
        db["spec"]["priority"] = json!(0);
        db["spec"]["volumes"] = json!([
            { "name": "data", "persistentVolumeClaim": { "claimName": "data" } },
            { "name": "ghost", "persistentVolumeClaim": { "claimName": "ghost" } },
            { "name": "files", "persistentVolumeClaim": { "claimName": "files" } },
            { "name": "scratch", "emptyDir": {} },
        ]);
        create_pod(client, &namespace, db).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        eventually("the DaemonSet's pod on the node", || async {
            let listed = pods
                .list(&ListParams::default().labels("app=agent"))
                .await?;
            Ok(listed
                .items
                .into_iter()
                .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&node)))
        })
        .await?;

        let listed = drain::list_node_pods(
            client,
            None,
            &ListNodePods {
                node: node.clone(),
                from_mirror: false,
            },
        )
        .await?;
        assert!(listed.node_found);
        assert_eq!(
            listed.health.ready.as_ref().map(|c| c.status.as_str()),
            Some("True")
        );
        let ours: Vec<_> = listed
            .pods
            .iter()
            .filter(|p| p.namespace == namespace)
            .cloned()
            .collect();
        assert_eq!(ours.len(), 2, "{ours:?}");
        let agent = ours
            .iter()
            .find(|p| p.name.starts_with("agent-"))
            .ok_or("no agent pod")?;
        assert_eq!(agent.controller_kind.as_deref(), Some("DaemonSet"));
        assert_eq!(agent.grace_period_seconds, Some(1));
        let db = ours.iter().find(|p| p.name == "db-0").ok_or("no db pod")?;
        assert_eq!(db.controller_kind, None);
        assert!(!db.uid.is_empty());
        assert_eq!(
            db.volumes,
            vec![
                VolumeFacts {
                    claim: "data".into(),
                    persistent_volume: Some(volume.clone()),
                    driver: Some(TEST_DRIVER.into()),
                    volume_handle: Some(format!("handle-{volume}")),
                    attach_required: true,
                    attached_here: true,
                    access_modes: vec!["ReadWriteOnce".into()],
                },
                VolumeFacts {
                    claim: "ghost".into(),
                    persistent_volume: None,
                    driver: None,
                    volume_handle: None,
                    attach_required: true,
                    attached_here: false,
                    access_modes: vec![],
                },
                VolumeFacts {
                    claim: "files".into(),
                    persistent_volume: Some(share.clone()),
                    driver: None,
                    volume_handle: None,
                    attach_required: false,
                    attached_here: false,
                    access_modes: vec!["ReadWriteMany".into()],
                },
            ]
        );

        // The bare pod with an emptyDir: refused under refuse, evicted and named under evict.
        assert_eq!(db.empty_dirs, vec!["scratch"]);
        let refused = plan_drain(&ours, LocalDataPolicy::Refuse);
        let lost = LocalDataPod {
            pod: db.key(),
            empty_dirs: vec!["scratch".into()],
            no_controller: true,
        };
        assert_eq!(refused.refused, vec![lost.clone()]);
        assert!(refused.with_volumes.is_empty());
        let plan = plan_drain(&ours, LocalDataPolicy::Evict);
        assert_eq!(plan.local_data, vec![lost]);
        assert_eq!(plan.skipped.len(), 1);
        assert_eq!(plan.skipped[0].reason, SkipReason::DaemonSet);
        assert_eq!(plan.with_volumes.len(), 1);
        assert_eq!(
            plan.with_volumes[0].tracked,
            vec![TrackedVolume {
                persistent_volume: volume.clone(),
                disk_id: None,
            }]
        );
        assert_eq!(
            plan.not_waited_on
                .iter()
                .map(|v| (v.persistent_volume.as_str(), v.why))
                .collect::<Vec<_>>(),
            vec![(share.as_str(), VolumeWait::UsedFromOtherNodes)]
        );

        let gone = drain::list_node_pods(
            client,
            None,
            &ListNodePods {
                node: run.name("absent"),
                from_mirror: false,
            },
        )
        .await?;
        assert!(!gone.node_found);
        assert!(gone.pods.is_empty());
        Ok(())
    }

    // ---- evictions and deletions --------------------------------------------------------

    #[tokio::test]
    async fn an_accepted_eviction_is_awaited_until_the_pod_is_gone() -> TestResult {
        let client = client().await?;
        let run = Run::new("evict");
        with_cleanup(&client, &run, evict_scenario(&client, &run)).await
    }

    async fn evict_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let node = run.name("node");
        create_ready_node(client, run, &NodeSpec::ours(&node)).await?;
        let namespace = run.name("ns");
        create_namespace(client, run, &namespace).await?;
        let pod = create_running_pod(client, &namespace, "web-1", &node, json!({})).await?;
        let action = PodAction {
            pod: pod.clone(),
            grace_period_seconds: None,
            node: None,
        };
        assert_eq!(
            drain::evict_pod(client, None, &action).await?,
            Eviction::Accepted
        );
        let beats = Beats::default();
        // Through a watch of the Node's pods.
        let wait = AwaitPodsGone {
            pods: vec![pod.clone()],
            deadline: in_seconds(60),
            node: Some(node.clone()),
        };
        let pending = drain::await_pods_gone(client, &beats, &wait).await?;
        assert!(pending.is_done(), "{pending:?}");
        assert!(beats.count() >= 1);
        assert_eq!(
            drain::evict_pod(client, None, &action).await?,
            Eviction::Gone
        );
        assert_eq!(drain::delete_pod(client, &action).await?, PodDeletion::Gone);
        Ok(())
    }

    #[tokio::test]
    async fn an_eviction_a_budget_refuses_is_reported_with_the_budget() -> TestResult {
        let client = client().await?;
        let run = Run::new("pdb");
        with_cleanup(&client, &run, budget_scenario(&client, &run)).await
    }

    async fn budget_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let node = run.name("node");
        create_ready_node(client, run, &NodeSpec::ours(&node)).await?;
        let namespace = run.name("ns");
        create_namespace(client, run, &namespace).await?;
        let labels = json!({ "app": "web" });
        let first = create_running_pod(client, &namespace, "web-1", &node, labels.clone()).await?;
        create_running_pod(client, &namespace, "web-2", &node, labels).await?;
        let budget: PodDisruptionBudget = parse(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": { "name": "web" },
            "spec": { "minAvailable": 2, "selector": { "matchLabels": { "app": "web" } } },
        }))?;
        let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &namespace);
        budgets.create(&PostParams::default(), &budget).await?;
        eventually("the budget's status to count both pods healthy", || async {
            let budget = budgets.get("web").await?;
            let status = budget.status.clone().unwrap_or_default();
            let observed = status.observed_generation == budget.metadata.generation;
            Ok((observed && status.current_healthy == Some(2)).then_some(()))
        })
        .await?;

        let action = PodAction {
            pod: first.clone(),
            grace_period_seconds: None,
            node: None,
        };
        let Eviction::Blocked { pdb, message } = drain::evict_pod(client, None, &action).await?
        else {
            return Err("the eviction was not blocked".into());
        };
        let pdb = pdb.ok_or("no budget reported")?;
        assert_eq!(pdb.key(), format!("{namespace}/web"));
        assert_eq!(pdb.generation, pdb.observed_generation);
        assert_eq!(
            (
                pdb.expected_pods,
                pdb.current_healthy,
                pdb.disruptions_allowed
            ),
            (2, 2, 0)
        );
        assert!(is_misconfigured(&pdb), "minAvailable = replicas: {pdb:?}");
        assert!(message.contains("disruption budget"), "{message}");
        let still = Api::<Pod>::namespaced(client.clone(), &namespace)
            .get("web-1")
            .await?;
        assert!(still.metadata.deletion_timestamp.is_none());

        // The same, read through a worker's mirrors once they are in sync: the refusal names
        // the same budget, and the look at the Node answers from them alone (its client
        // reaches no apiserver) what the apiserver answers.
        let cache = ClusterCache::default();
        eventually("the worker's mirrors to be in sync", || async {
            let synced = [
                cache.node_and_pods(client, &node).is_some(),
                cache.namespaces(client).is_some(),
                cache.budget(client, &namespace, "web").is_some(),
            ];
            Ok(synced.iter().all(|s| *s).then_some(()))
        })
        .await?;
        assert_eq!(cache.mirrored_nodes(), 1);
        let from_node = PodAction {
            node: Some(node.clone()),
            ..action.clone()
        };
        let Eviction::Blocked { pdb: mirrored, .. } =
            drain::evict_pod(client, Some(&cache), &from_node).await?
        else {
            return Err("the eviction was not blocked".into());
        };
        assert_eq!(mirrored.map(|p| p.key()), Some(format!("{namespace}/web")));
        let direct = drain::list_node_pods(
            client,
            None,
            &ListNodePods {
                node: node.clone(),
                from_mirror: false,
            },
        )
        .await?;
        let unreachable = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse()?))?;
        let looked = drain::list_node_pods(
            &unreachable,
            Some(&cache),
            &ListNodePods {
                node,
                from_mirror: true,
            },
        )
        .await?;
        assert_eq!(looked, direct);
        assert_eq!(looked.pods.len(), 2);
        Ok(())
    }

    #[tokio::test]
    async fn a_pod_of_another_uid_is_never_evicted_or_deleted() -> TestResult {
        let client = client().await?;
        let run = Run::new("uid");
        with_cleanup(&client, &run, uid_scenario(&client, &run)).await
    }

    async fn uid_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let node = run.name("node");
        create_ready_node(client, run, &NodeSpec::ours(&node)).await?;
        let namespace = run.name("ns");
        create_namespace(client, run, &namespace).await?;
        let pod = create_running_pod(client, &namespace, "web-1", &node, json!({})).await?;
        let stranger = PodAction {
            pod: PodRef {
                uid: "00000000-0000-0000-0000-000000000000".into(),
                ..pod.clone()
            },
            grace_period_seconds: None,
            node: None,
        };
        assert_eq!(
            drain::evict_pod(client, None, &stranger).await?,
            Eviction::Gone
        );
        assert_eq!(
            drain::delete_pod(client, &stranger).await?,
            PodDeletion::Gone
        );
        let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let still = pods.get("web-1").await?;
        assert_eq!(still.metadata.uid.as_deref(), Some(pod.uid.as_str()));
        assert!(still.metadata.deletion_timestamp.is_none());

        let action = PodAction {
            pod: pod.clone(),
            grace_period_seconds: None,
            node: None,
        };
        assert_eq!(
            drain::delete_pod(client, &action).await?,
            PodDeletion::Deleted
        );
        // As a wait scheduled before the Node was named: each pod read.
        let wait = AwaitPodsGone {
            pods: vec![pod],
            deadline: in_seconds(30),
            node: None,
        };
        assert!(
            drain::await_pods_gone(client, &Beats::default(), &wait)
                .await?
                .is_done()
        );
        assert_eq!(drain::delete_pod(client, &action).await?, PodDeletion::Gone);
        Ok(())
    }

    // ---- volumes ------------------------------------------------------------------------

    #[tokio::test]
    async fn volume_waits_follow_the_volume_attachments() -> TestResult {
        let client = client().await?;
        let run = Run::new("vols");
        with_cleanup(&client, &run, volumes_scenario(&client, &run)).await
    }

    async fn volumes_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let (old, new) = (run.name("old"), run.name("new"));
        let (pv_a, pv_b, pv_c) = (run.name("pv-a"), run.name("pv-b"), run.name("pv-c"));
        let wanted = vec![pv_a.clone(), pv_b.clone()];
        create_attachment(client, run, &run.name("va-1"), &old, &pv_a, true, false).await?;
        create_attachment(client, run, &run.name("va-2"), &old, &pv_b, false, true).await?;
        create_attachment(client, run, &run.name("va-0"), &new, &pv_c, true, false).await?;
        let input = |seconds: i64| AwaitVolumes {
            node: old.clone(),
            persistent_volumes: wanted.clone(),
            deadline: in_seconds(seconds),
        };

        let beats = Beats::default();
        let pending = drain::await_volumes_detached(client, &beats, &input(2)).await?;
        assert_eq!(pending.pending, wanted, "both attached: the wait times out");
        assert!(beats.count() >= 2, "heartbeats: {}", beats.count());

        let attachments: Api<VolumeAttachment> = Api::all(client.clone());
        for name in [run.name("va-1"), run.name("va-2")] {
            attachments.delete(&name, &DeleteParams::default()).await?;
        }
        let pending = drain::await_volumes_detached(client, &beats, &input(2)).await?;
        assert_eq!(
            pending.pending,
            vec![pv_b.clone()],
            "an attachment being deleted still holds its volume"
        );
        let release = tokio::spawn(release_later(client.clone(), run.name("va-2")));
        let pending = drain::await_volumes_detached(client, &beats, &input(30)).await?;
        release.await??;
        assert!(pending.is_done(), "{pending:?}");

        create_attachment(client, run, &run.name("va-3"), &new, &pv_a, false, false).await?;
        create_attachment(client, run, &run.name("va-4"), &old, &pv_b, true, false).await?;
        let waited = drain::await_volumes_reattached(client, &beats, &input(2)).await?;
        assert_eq!(
            waited,
            Reattached {
                attached: vec![],
                pending: wanted.clone(),
            },
            "not attached yet, and attached on the old node only"
        );
        create_attachment(client, run, &run.name("va-5"), &new, &pv_b, true, false).await?;
        let attach = tokio::spawn(attach_later(client.clone(), run.name("va-3")));
        let waited = drain::await_volumes_reattached(client, &beats, &input(30)).await?;
        attach.await??;
        assert_eq!(
            waited,
            Reattached {
                attached: vec![(pv_a, new.clone()), (pv_b, new)],
                pending: vec![],
            }
        );
        Ok(())
    }

    async fn release_later(client: kube::Client, name: String) -> TestResult {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        remove_finalizers(&client, &name).await
    }

    async fn attach_later(client: kube::Client, name: String) -> TestResult {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        set_attached(&client, &name).await
    }

    #[tokio::test]
    async fn force_mode_deletes_every_volume_attachment_of_the_node() -> TestResult {
        let client = client().await?;
        let run = Run::new("force");
        with_cleanup(&client, &run, force_scenario(&client, &run)).await
    }

    async fn force_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let (old, other) = (run.name("old"), run.name("other"));
        let (va_1, va_2, va_3) = (run.name("va-1"), run.name("va-2"), run.name("va-3"));
        create_attachment(client, run, &va_1, &old, &run.name("pv-1"), true, false).await?;
        create_attachment(client, run, &va_2, &old, &run.name("pv-2"), true, true).await?;
        create_attachment(client, run, &va_3, &other, &run.name("pv-3"), true, false).await?;
        let input = NodeAttachments { node: old.clone() };
        let mut deleted = drain::delete_node_volume_attachments(client, &input).await?;
        deleted.sort();
        assert_eq!(deleted, vec![va_1.clone(), va_2.clone()]);
        let attachments: Api<VolumeAttachment> = Api::all(client.clone());
        assert!(attachments.get_opt(&va_1).await?.is_none());
        assert!(
            attachments.get_opt(&va_3).await?.is_some(),
            "another node's"
        );
        // The finalizing one is deleted again (a no-op) until it is gone.
        assert_eq!(
            drain::delete_node_volume_attachments(client, &input).await?,
            vec![va_2.clone()]
        );
        remove_finalizers(client, &va_2).await?;
        eventually("the finalized attachment to go", || async {
            Ok(attachments.get_opt(&va_2).await?.is_none().then_some(()))
        })
        .await?;
        assert!(
            drain::delete_node_volume_attachments(client, &input)
                .await?
                .is_empty()
        );
        Ok(())
    }

    // ---- events ---------------------------------------------------------------------------

    #[tokio::test]
    async fn a_node_event_is_recorded_once_whatever_the_retries() -> TestResult {
        let client = client().await?;
        let run = Run::new("event");
        with_cleanup(&client, &run, event_scenario(&client, &run)).await
    }

    async fn event_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let name = run.name("node");
        create_node(client, run, &NodeSpec::ours(&name)).await?;
        let input = NodeEvent {
            node: name.clone(),
            name: format!("{name}.drain-annotation.{}", run.suffix),
            reason: "DrainAnnotationRefused".to_owned(),
            action: "Drain".to_owned(),
            note: format!("timeout 1s refused: kept 7200s{}", "x".repeat(2000)),
        };
        let first = record_node_event(client, &input).await?;
        let again = record_node_event(client, &input).await?;
        let events: Api<Event> = Api::namespaced(client.clone(), "default");
        let found = events.get(&input.name).await;
        let _ = events.delete(&input.name, &DeleteParams::default()).await;
        assert_eq!(first, EventRecorded::Created);
        assert_eq!(again, EventRecorded::Already, "a retry finds the Event");
        let event = found?;
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert_eq!(event.reason.as_deref(), Some("DrainAnnotationRefused"));
        assert_eq!(
            event.reporting_controller.as_deref(),
            Some("nodewright.io/worker")
        );
        let regarding = event.regarding.ok_or("no regarding")?;
        assert_eq!(regarding.kind.as_deref(), Some("Node"));
        assert_eq!(regarding.name.as_deref(), Some(name.as_str()));
        let node = Api::<Node>::all(client.clone()).get(&name).await?;
        assert_eq!(
            regarding.uid, node.metadata.uid,
            "regarding carries the Node's uid"
        );
        let note = event.note.unwrap_or_default();
        assert!(
            note.starts_with("timeout 1s refused") && note.len() <= 1024,
            "{note}"
        );

        let absent = NodeEvent {
            node: run.name("absent"),
            name: run.name("absent-event"),
            ..input
        };
        assert_eq!(
            record_node_event(client, &absent).await?,
            EventRecorded::NoNode
        );
        Ok(())
    }

    // ---- helpers ------------------------------------------------------------------------

    /// Runs `scenario`, then deletes the run's objects whether it passed, failed or panicked
    /// (an assertion), and answers as the scenario did.
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

    /// One test's objects: names with a unique suffix, all labelled for cleanup.
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

        fn selector(&self) -> ListParams {
            ListParams::default().labels(&format!("{RUN_LABEL}={}", self.suffix))
        }

        /// Deletes everything labelled with this run, logging (not failing on) errors.
        async fn clean(&self, client: &kube::Client) {
            let attachments: Api<VolumeAttachment> = Api::all(client.clone());
            if let Ok(list) = attachments.list(&self.selector()).await {
                for attachment in list.items {
                    let name = attachment.metadata.name.unwrap_or_default();
                    if let Err(error) = remove_finalizers(client, &name).await {
                        eprintln!("cleanup: finalizers of {name}: {error}");
                    }
                }
            }
            delete_labelled(Api::<VolumeAttachment>::all(client.clone()), self).await;
            delete_labelled(Api::<Namespace>::all(client.clone()), self).await;
            // Then their pods at once (grace 0): nothing finishes them once their Node is gone,
            // and the namespaces would wait for the pod garbage collector. Deleting them before
            // the namespace terminates would let the DaemonSet recreate its pod.
            let namespaces = Api::<Namespace>::all(client.clone());
            if let Ok(list) = namespaces.list(&self.selector()).await {
                for namespace in list.items {
                    let name = namespace.metadata.name.unwrap_or_default();
                    let pods: Api<Pod> = Api::namespaced(client.clone(), &name);
                    let now = DeleteParams {
                        grace_period_seconds: Some(0),
                        ..DeleteParams::default()
                    };
                    let listed = ListParams::default();
                    if let Err(error) = pods.delete_collection(&now, &listed).await {
                        eprintln!("cleanup: pods of {name}: {error}");
                    }
                }
            }
            delete_labelled(Api::<PersistentVolume>::all(client.clone()), self).await;
            delete_labelled(Api::<Node>::all(client.clone()), self).await;
        }
    }

    async fn delete_labelled<K>(api: Api<K>, run: &Run)
    where
        K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let listed = match api.list(&run.selector()).await {
            Ok(listed) => listed,
            Err(error) => return eprintln!("cleanup: listing: {error}"),
        };
        for object in listed.items {
            let name = object.meta().name.clone().unwrap_or_default();
            if let Err(error) = api.delete(&name, &DeleteParams::default()).await {
                eprintln!("cleanup: deleting {name}: {error}");
            }
        }
    }

    /// A heartbeat that counts.
    #[derive(Default)]
    struct Beats(AtomicUsize);

    impl Beats {
        fn count(&self) -> usize {
            self.0.load(Ordering::Relaxed)
        }
    }

    impl Heartbeat for Beats {
        async fn beat(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A kwok-managed Node as a test wants it.
    struct NodeSpec {
        name: String,
        /// The VM its providerID names.
        provider_vm: String,
        machine_label: Option<String>,
        taints: Value,
        annotations: Value,
    }

    impl NodeSpec {
        /// A Node of machine `name`: providerID and label name it.
        fn ours(name: &str) -> Self {
            Self {
                name: name.to_owned(),
                provider_vm: name.to_owned(),
                machine_label: Some(name.to_owned()),
                taints: json!([]),
                annotations: json!({}),
            }
        }
    }

    fn vm_id(name: &str) -> String {
        format!(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{name}"
        )
    }

    async fn create_node(client: &kube::Client, run: &Run, spec: &NodeSpec) -> TestResult {
        let mut labels = json!({
            "kubernetes.io/hostname": spec.name,
            "kubernetes.io/os": "linux",
            "type": "kwok",
            RUN_LABEL: run.suffix,
        });
        if let Some(machine) = &spec.machine_label {
            labels["nodewright.io/machine"] = json!(machine);
        }
        let mut annotations = spec.annotations.clone();
        annotations[KWOK_ANNOTATION] = json!("fake");
        let node: Node = parse(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": { "name": spec.name, "labels": labels, "annotations": annotations },
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

    async fn create_ready_node(client: &kube::Client, run: &Run, spec: &NodeSpec) -> TestResult {
        create_node(client, run, spec).await?;
        let nodes: Api<Node> = Api::all(client.clone());
        eventually("kwok to make the node Ready", || async {
            let node = nodes.get(&spec.name).await?;
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            Ok(ready.then_some(()))
        })
        .await
    }

    fn unschedulable(node: &Node) -> Option<bool> {
        node.spec.as_ref().and_then(|s| s.unschedulable)
    }

    /// When the drain's field manager last wrote the Node's spec (metadata and spec, not the
    /// status subresource).
    fn spec_written_at(node: &Node) -> Option<String> {
        node.metadata
            .managed_fields
            .iter()
            .flatten()
            .find(|f| f.manager.as_deref() == Some(drain::FIELD_MANAGER) && f.subresource.is_none())
            .and_then(|f| serde_json::to_value(&f.time).ok())
            .map(|time| time.to_string())
    }

    /// The Node's taints as `key=value:effect`, without the ones Kubernetes' own controllers
    /// manage (`node.kubernetes.io/unschedulable`, `not-ready`, ...).
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

    /// The `Terminating` condition as JSON, for field-by-field assertions.
    fn terminating(node: &Node) -> Option<Value> {
        node.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Terminating"))
            .and_then(|c| serde_json::to_value(c).ok())
    }

    async fn create_namespace(client: &kube::Client, run: &Run, name: &str) -> TestResult {
        let namespace: Namespace = parse(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": { "name": name, "labels": { RUN_LABEL: run.suffix } },
        }))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
        eventually("the namespace's default ServiceAccount", || async {
            Ok(accounts.get_opt("default").await?.map(|_| ()))
        })
        .await
    }

    /// A PersistentVolume of the fake CSI driver and the claim `data` bound to it.
    async fn create_volume_and_claim(
        client: &kube::Client,
        run: &Run,
        namespace: &str,
        volume: &str,
    ) -> TestResult {
        let persistent_volume: PersistentVolume = parse(json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": { "name": volume, "labels": { RUN_LABEL: run.suffix } },
            "spec": {
                "capacity": { "storage": "1Gi" },
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "claimRef": { "namespace": namespace, "name": "data" },
                "csi": { "driver": TEST_DRIVER, "volumeHandle": format!("handle-{volume}") },
            },
        }))?;
        Api::<PersistentVolume>::all(client.clone())
            .create(&PostParams::default(), &persistent_volume)
            .await?;
        let claim: PersistentVolumeClaim = parse(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": { "name": "data" },
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": volume,
                "resources": { "requests": { "storage": "1Gi" } },
            },
        }))?;
        Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &claim)
            .await?;
        Ok(())
    }

    /// An NFS PersistentVolume (in-tree: it never attaches) and the `ReadWriteMany` claim
    /// `files` bound to it.
    async fn create_nfs_volume_and_claim(
        client: &kube::Client,
        run: &Run,
        namespace: &str,
        volume: &str,
    ) -> TestResult {
        let persistent_volume: PersistentVolume = parse(json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": { "name": volume, "labels": { RUN_LABEL: run.suffix } },
            "spec": {
                "capacity": { "storage": "1Gi" },
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "claimRef": { "namespace": namespace, "name": "files" },
                "nfs": { "server": "nfs.example.test", "path": "/exports/files" },
            },
        }))?;
        Api::<PersistentVolume>::all(client.clone())
            .create(&PostParams::default(), &persistent_volume)
            .await?;
        let claim: PersistentVolumeClaim = parse(json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": { "name": "files" },
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": volume,
                "resources": { "requests": { "storage": "1Gi" } },
            },
        }))?;
        Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &claim)
            .await?;
        Ok(())
    }

    fn pod_body(name: &str, node: &str, labels: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": name, "labels": labels },
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 1,
                "containers": [{ "name": "app", "image": "registry.k8s.io/pause:3.10" }],
            },
        })
    }

    async fn create_pod(client: &kube::Client, namespace: &str, body: Value) -> TestResult<Pod> {
        let pod: Pod = parse(body)?;
        Ok(Api::<Pod>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &pod)
            .await?)
    }

    /// A pod bound to `node`, once kwok reports it Ready.
    async fn create_running_pod(
        client: &kube::Client,
        namespace: &str,
        name: &str,
        node: &str,
        labels: Value,
    ) -> TestResult<PodRef> {
        let created = create_pod(client, namespace, pod_body(name, node, labels)).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        eventually("kwok to run the pod", || async {
            let pod = pods.get(name).await?;
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            Ok(ready.then_some(()))
        })
        .await?;
        Ok(PodRef {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: created.metadata.uid.unwrap_or_default(),
            grace_period_seconds: 1,
        })
    }

    /// A VolumeAttachment of the fake attacher, optionally attached and held by a finalizer.
    async fn create_attachment(
        client: &kube::Client,
        run: &Run,
        name: &str,
        node: &str,
        volume: &str,
        attached: bool,
        held: bool,
    ) -> TestResult {
        let finalizers: Vec<&str> = if held { vec![HOLD_FINALIZER] } else { vec![] };
        let attachment: VolumeAttachment = parse(json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": {
                "name": name,
                "labels": { RUN_LABEL: run.suffix },
                "finalizers": finalizers,
            },
            "spec": {
                "attacher": FAKE_ATTACHER,
                "nodeName": node,
                "source": { "persistentVolumeName": volume },
            },
        }))?;
        Api::<VolumeAttachment>::all(client.clone())
            .create(&PostParams::default(), &attachment)
            .await?;
        if attached {
            set_attached(client, name).await?;
        }
        Ok(())
    }

    async fn set_attached(client: &kube::Client, name: &str) -> TestResult {
        let status = json!({ "status": { "attached": true } });
        Api::<VolumeAttachment>::all(client.clone())
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        Ok(())
    }

    async fn remove_finalizers(client: &kube::Client, name: &str) -> TestResult {
        let patch = json!({ "metadata": { "finalizers": null } });
        match Api::<VolumeAttachment>::all(client.clone())
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    fn in_seconds(seconds: i64) -> chrono::DateTime<Utc> {
        Utc::now() + chrono::Duration::seconds(seconds)
    }

    fn parse<T: DeserializeOwned>(value: Value) -> TestResult<T> {
        Ok(serde_json::from_value(value)?)
    }

    async fn eventually<T, F, Fut>(what: &str, mut check: F) -> TestResult<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = TestResult<Option<T>>>,
    {
        let started = Instant::now();
        loop {
            if let Some(value) = check().await? {
                return Ok(value);
            }
            if started.elapsed() > WAIT {
                return Err(format!("timed out waiting for {what}").into());
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
