//! The pool controller's look at its Nodes against the real API server of the local stack:
//! `kube.watch_pool_nodes` answers "unchanged" after its wait when nothing changed, does not
//! answer early for a Node status heartbeat, and answers within a second or two when a Node's
//! condition changes (KernelDeadlock=True); `kube.list_pool_nodes` with a lease timeout reports
//! a Node whose Lease went stale, and the watch answers as soon as that Lease is renewed. Looks
//! on one worker after the first list nothing: they watch on from the state the look before
//! kept, and see the changes made between two looks (a Node deleted too), as a list would.
//!
//! Run with `cargo test -p nodewright-activities --test kube_node_watch` after `dev/stack up`.
//! The kubeconfig comes from `KUBECONFIG`, or else from the stack's env file (`.run/env`);
//! without either the tests fail, saying the stack is needed.
//!
//! Every Node (and Lease) a test creates carries the label `nodewright.io/test-run=<suffix>`,
//! unique per test, and is deleted by that label at the end whether the test passed or not.
//! Their providerIDs name VMs of a made-up resource group, so the sandbox's node joiner leaves
//! them alone. The tests sit in a `#[cfg(test)]` module so the tidy test sees them as test code.

#[cfg(test)]
mod stack;

#[cfg(test)]
mod kube_node_watch {
    use std::future::Future;
    use std::panic::AssertUnwindSafe;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use chrono::{SecondsFormat, Utc};
    use futures::FutureExt;
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    use kube::Api;
    use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
    use nodewright_activities::kube::drain::Heartbeat;
    use nodewright_activities::kube::node_watch::{self, WatchMemory, unchanged};
    use nodewright_activities::kube::pool;
    use nodewright_activities::kube::{ListPoolNodes, WatchPoolNodes};
    use nodewright_activities::listing_cache::ListingCache;
    use nodewright_model::listing::{Listing, Since, apply};
    use nodewright_model::rollout::PoolNode;
    use serde_json::{Value, json};

    use super::stack::client;

    type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

    const WAIT: Duration = Duration::from_secs(90);
    const POLL: Duration = Duration::from_millis(250);
    const RUN_LABEL: &str = "nodewright.io/test-run";
    const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";
    const LEASE_NAMESPACE: &str = "kube-node-lease";
    /// How soon a change must end a wait.
    const PROMPTLY: Duration = Duration::from_secs(3);
    /// How long a test lets a watch settle before it changes something.
    const SETTLE: Duration = Duration::from_secs(2);

    #[tokio::test]
    async fn a_watch_answers_a_condition_change_at_once_and_a_heartbeat_never() -> TestResult {
        let client = client().await?;
        let run = Run::new("watch");
        with_cleanup(&client, &run, watch_scenario(&client, &run)).await
    }

    async fn watch_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let pool_name = run.name("web");
        let [first, second] = [run.name("a"), run.name("b")];
        for name in [&first, &second] {
            create_node(client, run, name, &pool_name, true).await?;
        }
        for name in [&first, &second] {
            await_ready(client, name).await?;
        }
        let started = now_text();
        set_kernel_deadlock(client, &first, "False", &started, &started).await?;
        let listings = ListingCache::default();
        let watch = |since: Option<&str>, max_wait_secs| Since {
            of: WatchPoolNodes {
                pool: pool_name.clone(),
                lease_timeout_secs: None,
                max_wait_secs,
            },
            since: since.map(str::to_owned),
        };

        // Nothing held: the whole list at once.
        let beats = Beats::default();
        let clock = Instant::now();
        let whole = node_watch::watch_pool_nodes(
            client,
            &beats,
            &listings,
            &WatchMemory::default(),
            &watch(None, 60),
        )
        .await?;
        assert!(clock.elapsed() < PROMPTLY, "{:?}", clock.elapsed());
        assert_eq!(whole.base, None);
        let (held, held_digest) = apply(None, whole)?;
        let names: Vec<&str> = held.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, [first.as_str(), second.as_str()]);
        assert_eq!(
            kernel_deadlock(&held, &first).as_deref(),
            Some("False"),
            "{held:?}"
        );

        // Unchanged: the wait runs out and answers "unchanged", which applies to the list held.
        let clock = Instant::now();
        let answer = node_watch::watch_pool_nodes(
            client,
            &beats,
            &listings,
            &WatchMemory::default(),
            &watch(Some(&held_digest), 4),
        )
        .await?;
        let waited = clock.elapsed();
        assert!(
            waited >= Duration::from_secs(4) && waited < Duration::from_secs(4) + PROMPTLY,
            "{waited:?}"
        );
        assert_eq!(answer, unchanged(&held_digest));
        assert_eq!(
            apply(Some((&held_digest, &held)), answer)?,
            (held.clone(), held_digest.clone())
        );
        assert!(beats.count() >= 2, "heartbeats: {}", beats.count());

        // A heartbeat (a new lastHeartbeatTime, the same transition) does not end the wait.
        let (answer, waited) = changed_while_watching(
            node_watch::watch_pool_nodes(
                client,
                &beats,
                &listings,
                &WatchMemory::default(),
                &watch(Some(&held_digest), 8),
            ),
            set_kernel_deadlock(client, &first, "False", &started, &now_text()),
        )
        .await?;
        assert!(waited >= Duration::from_secs(8), "{waited:?}: {answer:?}");
        assert_eq!(answer, unchanged(&held_digest));

        // KernelDeadlock=True ends it within a second or two, with that Node changed.
        let transition = now_text();
        let (answer, waited) = changed_while_watching(
            node_watch::watch_pool_nodes(
                client,
                &beats,
                &listings,
                &WatchMemory::default(),
                &watch(Some(&held_digest), 60),
            ),
            set_kernel_deadlock(client, &first, "True", &transition, &transition),
        )
        .await?;
        assert!(waited < SETTLE + PROMPTLY, "{waited:?}");
        assert_eq!(answer.base.as_deref(), Some(held_digest.as_str()));
        let changed: Vec<&str> = answer.items.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(changed, [first.as_str()], "only the Node that changed");
        assert!(answer.removed.is_empty());
        let (now_held, _) = apply(Some((&held_digest, &held)), answer)?;
        assert_eq!(kernel_deadlock(&now_held, &first).as_deref(), Some("True"));
        assert_eq!(now_held[1], held[1], "the other Node as it was");
        Ok(())
    }

    #[tokio::test]
    async fn a_stale_lease_is_reported_and_its_renewal_ends_a_watch() -> TestResult {
        let client = client().await?;
        let run = Run::new("lease");
        with_cleanup(&client, &run, lease_scenario(&client, &run)).await
    }

    async fn lease_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let pool_name = run.name("web");
        let fresh = run.name("fresh");
        let stale = run.name("stale");
        let leaseless = run.name("nolease");
        create_node(client, run, &fresh, &pool_name, true).await?;
        create_node(client, run, &stale, &pool_name, false).await?;
        create_node(client, run, &leaseless, &pool_name, false).await?;
        let renewed = Utc::now() - chrono::Duration::minutes(10);
        create_lease(
            client,
            run,
            &stale,
            &renewed.to_rfc3339_opts(SecondsFormat::Micros, true),
        )
        .await?;
        // The fresh Node settled (kwok has set its conditions) before the list the watch holds:
        // otherwise kwok's first status write is a change the watch answers before the renewal.
        await_ready(client, &fresh).await?;
        await_lease(client, &fresh).await?;

        let list = ListPoolNodes {
            pool: pool_name.clone(),
            lease_timeout_secs: Some(60),
        };
        let listed = pool::list_pool_nodes(client, &list).await?;
        let staleness = |nodes: &[PoolNode]| -> Vec<(String, Option<i64>)> {
            nodes
                .iter()
                .map(|n| (n.name.clone(), n.lease_stale_since))
                .collect()
        };
        let mut expected = vec![
            (fresh.clone(), None),
            (leaseless.clone(), None),
            (stale.clone(), Some(renewed.timestamp())),
        ];
        expected.sort();
        assert_eq!(staleness(&listed), expected);
        let without = ListPoolNodes {
            lease_timeout_secs: None,
            ..list
        };
        let listed_without = pool::list_pool_nodes(client, &without).await?;
        assert!(
            listed_without.iter().all(|n| n.lease_stale_since.is_none()),
            "no lease timeout, no Lease read: {listed_without:?}"
        );

        // A watch holding that list answers as soon as the stale Lease is renewed.
        let listings = ListingCache::default();
        let held = listings.answer(None, listed);
        let watch = Since {
            of: WatchPoolNodes {
                pool: pool_name.clone(),
                lease_timeout_secs: Some(60),
                max_wait_secs: 60,
            },
            since: Some(held.digest.clone()),
        };
        let (answer, waited) = changed_while_watching(
            node_watch::watch_pool_nodes(
                client,
                &Beats::default(),
                &listings,
                &WatchMemory::default(),
                &watch,
            ),
            renew_lease(client, &stale),
        )
        .await?;
        assert!(waited < SETTLE + PROMPTLY, "{waited:?}");
        assert_eq!(staleness(&answer.items), [(stale.clone(), None)]);
        Ok(())
    }

    #[tokio::test]
    async fn looks_after_the_first_list_nothing_and_see_what_changed_between_looks() -> TestResult {
        let client = client().await?;
        let run = Run::new("resume");
        with_cleanup(&client, &run, resume_scenario(&client, &run)).await
    }

    async fn resume_scenario(client: &kube::Client, run: &Run) -> TestResult {
        let pool_name = run.name("web");
        let [first, second] = [run.name("a"), run.name("b")];
        for name in [&first, &second] {
            create_node(client, run, name, &pool_name, true).await?;
        }
        for name in [&first, &second] {
            await_ready(client, name).await?;
            await_lease(client, name).await?;
        }
        let started = now_text();
        set_kernel_deadlock(client, &first, "False", &started, &started).await?;
        let lists = Arc::new(AtomicUsize::new(0));
        let counted = counting_lists(client, &lists);
        let listings = ListingCache::default();
        let memory = WatchMemory::default();
        let watch = |since: Option<&str>, max_wait_secs| Since {
            of: WatchPoolNodes {
                pool: pool_name.clone(),
                lease_timeout_secs: Some(60),
                max_wait_secs,
            },
            since: since.map(str::to_owned),
        };
        let look = |since: Option<String>, max_wait_secs| {
            let input = watch(since.as_deref(), max_wait_secs);
            let (counted, listings, memory) = (&counted, &listings, &memory);
            async move {
                node_watch::watch_pool_nodes(counted, &Beats::default(), listings, memory, &input)
                    .await
            }
        };

        // The first look lists the Nodes and the Leases.
        let (held, held_digest) = apply(None, look(None, 60).await?)?;
        assert_eq!(lists.load(Ordering::SeqCst), 2, "the Nodes and the Leases");

        // The next watches on from there: unchanged, and nothing listed.
        let answer = look(Some(held_digest.clone()), 4).await?;
        assert_eq!(answer, unchanged(&held_digest));
        assert_eq!(lists.load(Ordering::SeqCst), 2, "nothing listed again");

        // Between two looks the first Node gets a kernel deadlock and the second is deleted:
        // the next look sees both at once, without a list, and holds what a list gives.
        let transition = now_text();
        set_kernel_deadlock(client, &first, "True", &transition, &transition).await?;
        Api::<Node>::all(client.clone())
            .delete(&second, &DeleteParams::default())
            .await?;
        let clock = Instant::now();
        let answer = look(Some(held_digest.clone()), 60).await?;
        assert!(clock.elapsed() < PROMPTLY, "{:?}", clock.elapsed());
        let (mut now_held, now_digest) = apply(Some((&held_digest, &held)), answer)?;
        // The replayed events are answered together when they arrive together; else the next
        // look (watching on from where this one ended) answers the rest at once.
        if now_held.iter().any(|node| node.name == second) {
            let answer = look(Some(now_digest.clone()), 60).await?;
            assert!(clock.elapsed() < PROMPTLY * 2, "{:?}", clock.elapsed());
            now_held = apply(Some((&now_digest, &now_held)), answer)?.0;
        }
        assert_eq!(lists.load(Ordering::SeqCst), 2, "nothing listed again");
        assert_eq!(kernel_deadlock(&now_held, &first).as_deref(), Some("True"));
        let names: Vec<&str> = now_held.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, [first.as_str()], "the deleted Node is gone");
        let listed = pool::list_pool_nodes(
            client,
            &ListPoolNodes {
                pool: pool_name.clone(),
                lease_timeout_secs: Some(60),
            },
        )
        .await?;
        assert_eq!(now_held, listed, "what a list gives");
        Ok(())
    }

    // ---- helpers ------------------------------------------------------------------------

    /// `client`, counting in `lists` the lists it sends (GETs of a collection without `watch`).
    fn counting_lists(client: &kube::Client, lists: &Arc<AtomicUsize>) -> kube::Client {
        let real = client.clone();
        let lists = Arc::clone(lists);
        let counting = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let real = real.clone();
            let is_list = request.method() == http::Method::GET
                && (request.uri().path() == "/api/v1/nodes"
                    || request
                        .uri()
                        .path()
                        .ends_with("/namespaces/kube-node-lease/leases"))
                && !request.uri().query().unwrap_or_default().contains("watch=");
            if is_list {
                lists.fetch_add(1, Ordering::SeqCst);
            }
            async move { real.send(request).await }
        });
        kube::Client::new(counting, "default")
    }

    /// Starts `watching`, runs `change` after [`SETTLE`], and answers what the watch answered
    /// and how long after the change it did (from the start when it answered before).
    async fn changed_while_watching(
        watching: impl Future<Output = nodewright_activities::kube::Result<Listing<PoolNode>>>,
        change: impl Future<Output = TestResult>,
    ) -> TestResult<(Listing<PoolNode>, Duration)> {
        let started = Instant::now();
        let mut watching = std::pin::pin!(watching);
        tokio::select! {
            early = &mut watching => {
                return Err(format!("answered before any change: {early:?}").into());
            }
            () = tokio::time::sleep(SETTLE) => {}
        }
        change.await?;
        let answer = watching.await?;
        Ok((answer, started.elapsed()))
    }

    fn kernel_deadlock(nodes: &[PoolNode], name: &str) -> Option<String> {
        nodes
            .iter()
            .find(|n| n.name == name)?
            .conditions
            .iter()
            .find(|c| c.type_ == "KernelDeadlock")
            .map(|c| c.status.clone())
    }

    fn now_text() -> String {
        Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    /// Sets the Node's KernelDeadlock condition (a strategic merge by type: its other
    /// conditions stay).
    async fn set_kernel_deadlock(
        client: &kube::Client,
        name: &str,
        status: &str,
        transition: &str,
        heartbeat: &str,
    ) -> TestResult {
        let patch = json!({ "status": { "conditions": [{
            "type": "KernelDeadlock",
            "status": status,
            "reason": if status == "True" { "KernelHasDeadlock" } else { "KernelHasNoDeadlock" },
            "message": format!("heartbeat {heartbeat}"),
            "lastTransitionTime": transition,
            "lastHeartbeatTime": heartbeat,
        }]}});
        Api::<Node>::all(client.clone())
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await?;
        Ok(())
    }

    async fn create_lease(
        client: &kube::Client,
        run: &Run,
        name: &str,
        renewed: &str,
    ) -> TestResult {
        let lease: Lease = serde_json::from_value(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": LEASE_NAMESPACE,
                "labels": { RUN_LABEL: run.suffix },
            },
            "spec": { "holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": renewed },
        }))?;
        Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE)
            .create(&PostParams::default(), &lease)
            .await?;
        Ok(())
    }

    async fn renew_lease(client: &kube::Client, name: &str) -> TestResult {
        let now = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);
        let patch = json!({ "spec": { "renewTime": now } });
        Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// Waits until kwok has created the Node's Lease.
    async fn await_lease(client: &kube::Client, name: &str) -> TestResult {
        let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
        let started = Instant::now();
        while leases.get_opt(name).await?.is_none() {
            if started.elapsed() > WAIT {
                return Err(
                    format!("timed out waiting for kwok to create the Lease of {name}").into(),
                );
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

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

    /// Runs `scenario`, then deletes the run's Nodes and Leases whether it passed, failed or
    /// panicked (an assertion), and answers as the scenario did.
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

        /// Deletes every Node and Lease labelled with this run, logging (not failing on)
        /// errors.
        async fn clean(&self, client: &kube::Client) {
            let selector = ListParams::default().labels(&format!("{RUN_LABEL}={}", self.suffix));
            let nodes: Api<Node> = Api::all(client.clone());
            let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
            if let Err(error) = nodes
                .delete_collection(&DeleteParams::default(), &selector)
                .await
            {
                eprintln!("cleanup: deleting the Nodes: {error}");
            }
            if let Err(error) = leases
                .delete_collection(&DeleteParams::default(), &selector)
                .await
            {
                eprintln!("cleanup: deleting the Leases: {error}");
            }
        }
    }

    async fn create_node(
        client: &kube::Client,
        run: &Run,
        name: &str,
        pool: &str,
        kwok: bool,
    ) -> TestResult {
        let annotations: Value = if kwok {
            json!({ KWOK_ANNOTATION: "fake" })
        } else {
            json!({})
        };
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "type": "kwok",
                    "nodewright.io/pool": pool,
                    "nodewright.io/machine": name,
                    RUN_LABEL: run.suffix,
                },
                "annotations": annotations,
            },
            "spec": {
                "providerID": format!("azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{name}"),
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
}
