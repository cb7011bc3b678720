//! `kube.watch_pool_nodes` against a scripted apiserver, for what the real one does only when it
//! chooses to: a watch answered with 410 Gone (its `resourceVersion` expired) lists again, and a
//! watch the apiserver ends is started again from the last version seen (a bookmark's). The
//! rest of the watch's behaviour is tested against the real apiserver (`kube_node_watch.rs`).
//!
//! Run with `cargo test -p nodewright-activities --test kube_node_watch_scripted`; it needs no
//! stack. The tests sit in a `#[cfg(test)]` module so the tidy test sees them as test code.

#[cfg(test)]
mod kube_node_watch_scripted {
    use std::time::{Duration, Instant};

    use nodewright_activities::kube::drain::Heartbeat;
    use nodewright_activities::kube::node_watch::{self, unchanged};
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
        let whole = node_watch::watch_pool_nodes(
            client,
            &NoBeats,
            listings,
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
        let answer =
            node_watch::watch_pool_nodes(&client, &NoBeats, &listings, &watch(&held_digest, 30))
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
        let answer =
            node_watch::watch_pool_nodes(&client, &NoBeats, &listings, &watch(&held_digest, 3))
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
