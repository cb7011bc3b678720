//! `kube.watch_pool_nodes` against a scripted apiserver, for what the real one does only when it
//! chooses to: a watch answered with 410 Gone (its `resourceVersion` expired) lists again, and a
//! watch the apiserver ends is started again from the last version seen (a bookmark's); and for
//! the requests a look makes: a look after another on the same worker lists nothing and watches
//! from the version the last one ended at, and a resumed watch that fails lists instead. The
//! rest of the watch's behaviour is tested against the real apiserver (`kube_node_watch.rs`).
//!
//! Run with `cargo test -p nodewright-activities --test kube_node_watch_scripted`; it needs no
//! stack. The tests sit in a `#[cfg(test)]` module so the tidy test sees them as test code.

#[cfg(test)]
mod kube_node_watch_scripted {
    use std::time::{Duration, Instant};

    use nodewright_activities::kube::drain::Heartbeat;
    use nodewright_activities::kube::node_watch::{self, WatchMemory, unchanged};
    use nodewright_activities::kube::{WatchPoolNodes, client_from_config};
    use nodewright_activities::listing_cache::ListingCache;
    use nodewright_model::listing::{Since, apply};
    use nodewright_model::rollout::PoolNode;
    use serde_json::{Value, json};
    use wiremock::matchers::{method, path, query_param, query_param_is_missing};
    use wiremock::{Mock, MockServer, Request, ResponseTemplate};

    type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

    const NODES: &str = "/api/v1/nodes";
    const SELECTOR: &str = "nodewright.io/pool=web";

    struct NoBeats;

    impl Heartbeat for NoBeats {
        async fn beat(&self) {}
    }

    fn node(name: &str, version: &str, deadlock: &str, heartbeat: &str) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": name, "resourceVersion": version,
                "labels": { "nodewright.io/pool": "web" },
            },
            "spec": { "providerID": format!("azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{name}") },
            "status": { "conditions": [
                { "type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
                  "lastHeartbeatTime": heartbeat },
                { "type": "KernelDeadlock", "status": deadlock,
                  "lastTransitionTime": if deadlock == "True" { "2026-01-02T00:00:00Z" } else { "2026-01-01T00:00:00Z" },
                  "lastHeartbeatTime": heartbeat },
            ] },
        })
    }

    fn list(version: &str, items: Vec<Value>) -> ResponseTemplate {
        ResponseTemplate::new(200).set_body_json(json!({
            "apiVersion": "v1", "kind": "NodeList",
            "metadata": { "resourceVersion": version },
            "items": items,
        }))
    }

    /// A watch's answer: one JSON event a line, then the end of the watch.
    fn events(lines: &[Value]) -> ResponseTemplate {
        let body: String = lines.iter().map(|line| format!("{line}\n")).collect();
        ResponseTemplate::new(200).set_body_raw(body, "application/json")
    }

    async fn client(server: &MockServer) -> TestResult<kube::Client> {
        let config = kube::Config::new(server.uri().parse()?);
        Ok(client_from_config(config)?)
    }

    fn watch(since: &str, max_wait_secs: u64) -> Since<WatchPoolNodes> {
        Since {
            of: WatchPoolNodes {
                pool: "web".to_owned(),
                lease_timeout_secs: None,
                max_wait_secs,
            },
            since: Some(since.to_owned()),
        }
    }

    /// Lists once through the watch (nothing held: it answers the whole list at once).
    async fn first_look(
        client: &kube::Client,
        listings: &ListingCache<PoolNode>,
    ) -> TestResult<(Vec<PoolNode>, String)> {
        first_look_keeping(client, listings, &WatchMemory::default()).await
    }

    /// [`first_look`], keeping the watch's state in `memory`.
    async fn first_look_keeping(
        client: &kube::Client,
        listings: &ListingCache<PoolNode>,
        memory: &WatchMemory,
    ) -> TestResult<(Vec<PoolNode>, String)> {
        let whole = node_watch::watch_pool_nodes(
            client,
            &NoBeats,
            listings,
            memory,
            &Since {
                of: WatchPoolNodes {
                    pool: "web".to_owned(),
                    lease_timeout_secs: None,
                    max_wait_secs: 30,
                },
                since: None,
            },
        )
        .await?;
        assert_eq!(whole.base, None);
        Ok(apply(None, whole)?)
    }

    fn is_list(request: &Request) -> bool {
        !request.url.query_pairs().any(|(key, _)| key == "watch")
    }

    /// The versions the watches among `requests` started from, in order.
    fn watched_from(requests: &[Request]) -> Vec<String> {
        requests
            .iter()
            .filter(|r| !is_list(r))
            .filter_map(|r| {
                r.url
                    .query_pairs()
                    .find(|(key, _)| key == "resourceVersion")
                    .map(|(_, value)| value.into_owned())
            })
            .collect()
    }

    fn kernel_deadlock(nodes: &[PoolNode]) -> Vec<(&str, &str)> {
        nodes[0]
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect()
    }

    #[tokio::test]
    async fn a_look_after_another_on_the_worker_lists_nothing_and_watches_on_from_its_version()
    -> TestResult {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param_is_missing("watch"))
            .respond_with(list(
                "10",
                vec![node("web-a", "10", "False", "2026-01-03T00:00:00Z")],
            ))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param("watch", "true"))
            .and(query_param("labelSelector", SELECTOR))
            .and(query_param("resourceVersion", "10"))
            .respond_with(events(&[
                json!({ "type": "MODIFIED",
                        "object": node("web-a", "11", "False", "2026-01-03T00:00:40Z") }),
                json!({ "type": "BOOKMARK", "object": {
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": { "resourceVersion": "15" } } }),
            ]))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param("watch", "true"))
            .and(query_param("resourceVersion", "15"))
            .respond_with(events(&[]))
            .mount(&server)
            .await;
        let client = client(&server).await?;
        let listings = ListingCache::default();
        let memory = WatchMemory::default();
        let (held, held_digest) = first_look_keeping(&client, &listings, &memory).await?;

        // The second look starts from the first's list: no list, a watch from version 10.
        let answer = node_watch::watch_pool_nodes(
            &client,
            &NoBeats,
            &listings,
            &memory,
            &watch(&held_digest, 2),
        )
        .await?;
        assert_eq!(answer, unchanged(&held_digest), "a heartbeat only");
        let requests = server.received_requests().await.unwrap_or_default();
        assert_eq!(
            requests.iter().filter(|r| is_list(r)).count(),
            1,
            "the first look's"
        );
        let versions = watched_from(&requests);
        assert_eq!(
            versions.first().map(String::as_str),
            Some("10"),
            "{versions:?}"
        );

        // The third starts where the second ended (the bookmark's version) and sees the change
        // made since.
        server.reset().await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param_is_missing("watch"))
            .respond_with(list(
                "30",
                vec![node("web-a", "30", "True", "2026-01-03T00:01:00Z")],
            ))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param("watch", "true"))
            .and(query_param("resourceVersion", "15"))
            .respond_with(events(&[json!({ "type": "MODIFIED",
                "object": node("web-a", "16", "True", "2026-01-03T00:01:00Z") })]))
            .mount(&server)
            .await;
        let clock = Instant::now();
        let answer = node_watch::watch_pool_nodes(
            &client,
            &NoBeats,
            &listings,
            &memory,
            &watch(&held_digest, 30),
        )
        .await?;
        assert!(
            clock.elapsed() < Duration::from_secs(5),
            "{:?}",
            clock.elapsed()
        );
        let (now_held, _) = apply(Some((&held_digest, &held)), answer)?;
        assert_eq!(
            kernel_deadlock(&now_held),
            [("KernelDeadlock", "True"), ("Ready", "True")]
        );
        let requests = server.received_requests().await.unwrap_or_default();
        assert_eq!(requests.iter().filter(|r| is_list(r)).count(), 0);
        assert_eq!(watched_from(&requests), ["15"]);
        Ok(())
    }

    #[tokio::test]
    async fn a_resumed_watch_that_fails_lists_instead_and_answers_the_new_list() -> TestResult {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param_is_missing("watch"))
            .respond_with(list(
                "10",
                vec![node("web-a", "10", "False", "2026-01-03T00:00:00Z")],
            ))
            .up_to_n_times(1)
            .with_priority(1)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param_is_missing("watch"))
            .respond_with(list(
                "30",
                vec![node("web-a", "30", "True", "2026-01-03T00:01:00Z")],
            ))
            .with_priority(2)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param("watch", "true"))
            .and(query_param("resourceVersion", "10"))
            .respond_with(ResponseTemplate::new(500).set_body_json(json!({
                "apiVersion": "v1", "kind": "Status", "status": "Failure",
                "message": "etcdserver: mvcc: required revision has been compacted",
                "reason": "InternalError", "code": 500 })))
            .mount(&server)
            .await;
        let client = client(&server).await?;
        let listings = ListingCache::default();
        let memory = WatchMemory::default();
        let (held, held_digest) = first_look_keeping(&client, &listings, &memory).await?;

        let answer = node_watch::watch_pool_nodes(
            &client,
            &NoBeats,
            &listings,
            &memory,
            &watch(&held_digest, 30),
        )
        .await?;
        let (now_held, _) = apply(Some((&held_digest, &held)), answer)?;
        assert_eq!(
            kernel_deadlock(&now_held),
            [("KernelDeadlock", "True"), ("Ready", "True")]
        );
        let requests = server.received_requests().await.unwrap_or_default();
        assert_eq!(
            watched_from(&requests),
            ["10"],
            "the resumed watch, refused"
        );
        assert_eq!(
            requests.iter().filter(|r| is_list(r)).count(),
            2,
            "the first look's, and the list instead of the resumed watch"
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_watch_answered_gone_lists_again_and_answers_the_new_list() -> TestResult {
        let server = MockServer::start().await;
        let steady = node("web-a", "10", "False", "2026-01-03T00:00:00Z");
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param("labelSelector", SELECTOR))
            .and(query_param_is_missing("watch"))
            .respond_with(list("10", vec![steady.clone()]))
            .up_to_n_times(2)
            .with_priority(1)
            .mount(&server)
            .await;
        let deadlocked = node("web-a", "30", "True", "2026-01-03T00:01:00Z");
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param_is_missing("watch"))
            .respond_with(list("30", vec![deadlocked]))
            .with_priority(2)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param("watch", "true"))
            .and(query_param("labelSelector", SELECTOR))
            .and(query_param("resourceVersion", "10"))
            .and(query_param("allowWatchBookmarks", "true"))
            .respond_with(events(&[
                json!({ "type": "MODIFIED",
                        "object": node("web-a", "11", "False", "2026-01-03T00:00:40Z") }),
                json!({ "type": "ERROR", "object": {
                    "apiVersion": "v1", "kind": "Status", "status": "Failure",
                    "message": "too old resource version: 10 (25)", "reason": "Expired",
                    "code": 410 } }),
            ]))
            .mount(&server)
            .await;
        let client = client(&server).await?;
        let listings = ListingCache::default();
        let (held, held_digest) = first_look(&client, &listings).await?;

        let clock = Instant::now();
        let answer = node_watch::watch_pool_nodes(
            &client,
            &NoBeats,
            &listings,
            &WatchMemory::default(),
            &watch(&held_digest, 30),
        )
        .await?;
        assert!(
            clock.elapsed() < Duration::from_secs(5),
            "{:?}",
            clock.elapsed()
        );
        assert_eq!(answer.base.as_deref(), Some(held_digest.as_str()));
        let (now_held, _) = apply(Some((&held_digest, &held)), answer)?;
        let deadlock: Vec<(&str, &str)> = now_held[0]
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(deadlock, [("KernelDeadlock", "True"), ("Ready", "True")]);
        let requests = server.received_requests().await.unwrap_or_default();
        let lists = requests.iter().filter(|r| is_list(r)).count();
        assert_eq!(
            lists, 3,
            "the first look, this look, and the list after the 410"
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_watch_the_apiserver_ends_goes_on_from_the_bookmark_and_heartbeats_never_answer()
    -> TestResult {
        let server = MockServer::start().await;
        let steady = node("web-a", "10", "False", "2026-01-03T00:00:00Z");
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param_is_missing("watch"))
            .respond_with(list("10", vec![steady]))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param("watch", "true"))
            .and(query_param("resourceVersion", "10"))
            .respond_with(events(&[
                json!({ "type": "MODIFIED",
                        "object": node("web-a", "11", "False", "2026-01-03T00:00:40Z") }),
                json!({ "type": "BOOKMARK", "object": {
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": { "resourceVersion": "15" } } }),
            ]))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param("watch", "true"))
            .and(query_param("resourceVersion", "15"))
            .respond_with(events(&[json!({ "type": "MODIFIED",
                "object": node("web-a", "16", "False", "2026-01-03T00:01:20Z") })]))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(NODES))
            .and(query_param("watch", "true"))
            .and(query_param("resourceVersion", "16"))
            .respond_with(events(&[]))
            .mount(&server)
            .await;
        let client = client(&server).await?;
        let listings = ListingCache::default();
        let (_, held_digest) = first_look(&client, &listings).await?;

        let clock = Instant::now();
        let answer = node_watch::watch_pool_nodes(
            &client,
            &NoBeats,
            &listings,
            &WatchMemory::default(),
            &watch(&held_digest, 3),
        )
        .await?;
        assert!(clock.elapsed() >= Duration::from_secs(3), "{answer:?}");
        assert_eq!(answer, unchanged(&held_digest));
        let requests = server.received_requests().await.unwrap_or_default();
        let versions: Vec<String> = requests
            .iter()
            .filter(|r| !is_list(r))
            .filter_map(|r| {
                r.url
                    .query_pairs()
                    .find(|(key, _)| key == "resourceVersion")
                    .map(|(_, value)| value.into_owned())
            })
            .collect();
        assert_eq!(
            versions.get(..3),
            Some(["10", "15", "16"].map(str::to_owned).as_slice()),
            "watched again from the bookmark, then from the last event: {versions:?}"
        );
        assert!(
            versions.len() <= 5,
            "a watch ended at once is not started again at once: {versions:?}"
        );
        Ok(())
    }
}
