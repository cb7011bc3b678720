//! A pool's VMs with their power states, and the restart and redeploy rungs, against the ARM
//! emulator (the sandbox) run in-process on `127.0.0.1:0` with its instant latency profile
//! (every operation completes on the next request): the listing reads power states from two
//! lists, whatever the number of VMs, never a GET per VM; a restart or redeploy of this
//! cluster's machine reaches Azure once and ends `Succeeded`; a VM that is not the machine's,
//! or gone, is refused before anything is sent; Azure's refusals keep their classification.
//!
//! The tests sit in a `#[cfg(test)]` module so the tidy test sees them as test code.

#[cfg(test)]
mod arm_vm_power {
    use std::time::Duration;

    use nodewright_activities::azure::machines::pool::list_pool_vms;
    use nodewright_activities::azure::machines::power::{self, PowerAction};
    use nodewright_activities::azure::machines::{
        ListPoolVms, MachineError, VmAction, VmActionDone, VmSource,
    };
    use nodewright_activities::azure::{
        ArmClient, ArmConfig, Credential, Error as ArmError, OperationHandle,
    };
    use nodewright_model::ClusterName;
    use nodewright_model::arm::Disposition;
    use nodewright_model::ownership::{TAG_CLUSTER, TAG_MACHINE, TAG_POOL};
    use nodewright_sandbox::arm::{Emulator, EmulatorConfig, FaultRule, LatencyProfile, app};
    use serde_json::{Value, json};
    use temporalio_sdk::activities::ActivityError;

    type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

    const SUBSCRIPTION: &str = "00000000-0000-0000-0000-0000000000a7";
    const GROUP: &str = "machines";
    const OTHER_GROUP: &str = "elsewhere";
    const VM_API: &str = "api-version=2024-07-01";
    const WAIT: Duration = Duration::from_secs(30);

    /// The emulator, nodewright's client for its resource group, and plain HTTP to arrange VMs
    /// as a user of Azure would.
    struct Arm {
        emulator: Emulator,
        client: ArmClient,
        http: reqwest::Client,
        base: String,
    }

    impl Arm {
        async fn start(page_size: usize) -> TestResult<Self> {
            let emulator = Emulator::new(EmulatorConfig {
                latency: LatencyProfile::Instant,
                page_size,
                ..EmulatorConfig::default()
            })?;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let address = listener.local_addr()?;
            let router = app(emulator.clone());
            tokio::spawn(async move {
                if let Err(error) = axum::serve(listener, router).await {
                    eprintln!("the emulator stopped: {error}");
                }
            });
            let base = format!("http://{address}");
            let client = ArmClient::new(
                ArmConfig::new(format!("{base}/").parse()?, SUBSCRIPTION, GROUP),
                Credential::fixed("test-token"),
            )?;
            Ok(Self {
                emulator,
                client,
                http: reqwest::Client::new(),
                base,
            })
        }

        fn vm_url(&self, group: &str, name: &str, tail: &str) -> String {
            format!(
                "{}/subscriptions/{SUBSCRIPTION}/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachines/{name}{tail}?{VM_API}",
                self.base
            )
        }

        async fn call(
            &self,
            method: reqwest::Method,
            url: &str,
            body: Option<Value>,
        ) -> TestResult<Value> {
            let mut request = self.http.request(method.clone(), url);
            if let Some(body) = body {
                request = request.json(&body);
            }
            let response = request.send().await?;
            let status = response.status();
            let text = response.text().await?;
            if !status.is_success() {
                return Err(format!("{method} {url}: {status} {text}").into());
            }
            Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
        }

        /// Creates a running VM and waits until its create ended.
        async fn create_vm(&self, group: &str, name: &str, tags: Value) -> TestResult {
            let body = json!({
                "location": "westeurope",
                "tags": tags,
                "properties": {
                    "hardwareProfile": { "vmSize": "Standard_D2s_v5" },
                    "storageProfile": { "osDisk": { "createOption": "FromImage", "deleteOption": "Delete" } },
                    "osProfile": { "computerName": name, "adminUsername": "nodewright" },
                },
            });
            self.call(
                reqwest::Method::PUT,
                &self.vm_url(group, name, ""),
                Some(body),
            )
            .await?;
            self.await_power(group, name, "running").await
        }

        /// Sends a power action (`powerOff`, `deallocate`) as a user would.
        async fn power(&self, group: &str, name: &str, action: &str, ends: &str) -> TestResult {
            self.call(
                reqwest::Method::POST,
                &self.vm_url(group, name, &format!("/{action}")),
                None,
            )
            .await?;
            self.await_power(group, name, ends).await
        }

        /// The VM's power state from its instance view.
        async fn power_state(&self, group: &str, name: &str) -> TestResult<String> {
            let view = self
                .call(
                    reqwest::Method::GET,
                    &self.vm_url(group, name, "/instanceView"),
                    None,
                )
                .await?;
            Ok(view["statuses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|status| status["code"].as_str())
                .find_map(|code| code.strip_prefix("PowerState/"))
                .unwrap_or_default()
                .to_owned())
        }

        async fn await_power(&self, group: &str, name: &str, wanted: &str) -> TestResult {
            let mut seen = String::new();
            for _ in 0..100 {
                seen = self.power_state(group, name).await?;
                if seen == wanted {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(format!("VM {name} stayed {seen}, not {wanted}").into())
        }

        /// Requests answered for `operation` (e.g. `vm.restart`), whatever their status.
        fn count(&self, operation: &str) -> u64 {
            self.emulator
                .stats()
                .by_operation
                .get(operation)
                .map_or(0, |by_status| by_status.values().sum())
        }
    }

    fn prod() -> ClusterName {
        ClusterName::parse("cluster", "prod").unwrap_or_else(|error| panic!("{error}"))
    }

    fn machine_tags(pool: &str, machine: &str) -> Value {
        json!({ TAG_CLUSTER: "prod", TAG_POOL: pool, TAG_MACHINE: machine })
    }

    fn action(machine: &str) -> VmAction {
        VmAction {
            cluster: prod(),
            machine: machine.to_owned(),
        }
    }

    /// The application failure an error becomes at the activity boundary.
    fn boundary(error: MachineError) -> (String, Option<String>, bool) {
        match error.into_activity_error() {
            ActivityError::Application(failure) => (
                failure.to_string(),
                failure.type_name().map(str::to_owned),
                failure.is_non_retryable(),
            ),
            other => panic!("not an application failure: {other:?}"),
        }
    }

    /// An emulator (lists paged by 2) with the pool web's VMs running, stopped and deallocated,
    /// another pool's VM, an untagged VM, and a deallocated VM of the same name and tags as
    /// web-run in another resource group of the subscription (not the pool's: ids differ).
    async fn three_power_states() -> TestResult<Arm> {
        let arm = Arm::start(2).await?;
        for name in ["web-run", "web-off", "web-dealloc"] {
            arm.create_vm(GROUP, name, machine_tags("web", name))
                .await?;
        }
        arm.create_vm(GROUP, "db-1", machine_tags("db", "db-1"))
            .await?;
        arm.create_vm(GROUP, "stray", json!({})).await?;
        arm.create_vm(OTHER_GROUP, "web-run", machine_tags("web", "web-run"))
            .await?;
        arm.power(GROUP, "web-off", "powerOff", "stopped").await?;
        arm.power(GROUP, "web-dealloc", "deallocate", "deallocated")
            .await?;
        arm.power(OTHER_GROUP, "web-run", "deallocate", "deallocated")
            .await?;
        Ok(arm)
    }

    #[tokio::test]
    async fn power_states_come_from_two_lists_whatever_the_number_of_vms() -> TestResult {
        let arm = three_power_states().await?;

        let plain = ListPoolVms {
            cluster: prod(),
            pool: "web".to_owned(),
            instance_view: false,
            source: VmSource::ResourceGroup,
            expected: Vec::new(),
        };
        arm.emulator.reset_stats();
        let listed = list_pool_vms(&arm.client, &plain).await?;
        let plain_stats = arm.emulator.stats();
        let states = |vms: &[nodewright_model::rollout::PoolVm]| -> Vec<(String, Option<String>)> {
            vms.iter()
                .map(|vm| (vm.name.clone(), vm.power_state.clone()))
                .collect()
        };
        assert_eq!(
            states(&listed),
            vec![
                ("web-dealloc".to_owned(), None),
                ("web-off".to_owned(), None),
                ("web-run".to_owned(), None),
            ],
            "without instance views no power state is read"
        );
        assert_eq!(arm.count("vm.list"), 3, "5 VMs of the group in pages of 2");
        assert_eq!(plain_stats.total, 3);

        arm.emulator.reset_stats();
        let with_views = ListPoolVms {
            instance_view: true,
            ..plain.clone()
        };
        let listed = list_pool_vms(&arm.client, &with_views).await?;
        assert_eq!(
            states(&listed),
            vec![
                ("web-dealloc".to_owned(), Some("deallocated".to_owned())),
                ("web-off".to_owned(), Some("stopped".to_owned())),
                ("web-run".to_owned(), Some("running".to_owned())),
            ]
        );
        assert_eq!(arm.count("vm.list"), 3, "the group's list as without");
        assert_eq!(
            arm.count("vm.listAll"),
            3,
            "the subscription's 6 VM statuses in pages of 2"
        );
        assert_eq!(arm.count("vm.get") + arm.count("vm.instanceView"), 0);
        assert_eq!(arm.emulator.stats().total, plain_stats.total + 3);

        // A pool without VMs needs no statuses.
        arm.emulator.reset_stats();
        let empty = ListPoolVms {
            pool: "cache".to_owned(),
            ..with_views
        };
        assert!(list_pool_vms(&arm.client, &empty).await?.is_empty());
        assert_eq!(arm.count("vm.listAll"), 0);
        Ok(())
    }

    #[tokio::test]
    async fn resource_graph_lists_the_pool_with_power_states_in_one_request() -> TestResult {
        let arm = three_power_states().await?;

        let input = ListPoolVms {
            cluster: prod(),
            pool: "web".to_owned(),
            instance_view: false,
            source: VmSource::ResourceGraph,
            expected: vec![
                "web-run".to_owned(),
                "web-gone".to_owned(),
                "db-1".to_owned(),
            ],
        };
        arm.emulator.reset_stats();
        let listed = nodewright_activities::azure::machines::pool_graph::list_pool_vms(
            &arm.client,
            &input,
            &[],
        )
        .await?;
        assert_eq!(
            listed
                .iter()
                .map(|vm| (vm.name.as_str(), vm.power_state.as_deref()))
                .collect::<Vec<_>>(),
            vec![
                ("web-dealloc", Some("deallocated")),
                ("web-off", Some("stopped")),
                ("web-run", Some("running")),
            ],
            "the group's pool VMs with their power states; another group's web-run is not ours"
        );
        assert_eq!(
            arm.count("graph.query"),
            1,
            "one query, whatever the page size of lists"
        );
        assert_eq!(arm.count("vm.list") + arm.count("vm.listAll"), 0);
        assert_eq!(
            arm.count("vm.get"),
            2,
            "the expected VMs the index lacks (web-gone: 404; db-1: not the pool's) are read"
        );
        assert_eq!(arm.emulator.stats().count("vm.get", 404), 1);
        Ok(())
    }

    #[tokio::test]
    async fn without_the_right_to_list_the_subscription_power_states_are_unknown() -> TestResult {
        let arm = Arm::start(50).await?;
        arm.create_vm(GROUP, "web-1", machine_tags("web", "web-1"))
            .await?;
        let input = ListPoolVms {
            cluster: prod(),
            pool: "web".to_owned(),
            instance_view: true,
            source: VmSource::ResourceGroup,
            expected: Vec::new(),
        };
        // A role assigned on the resource group only: ARM refuses the subscription's list.
        let forbidden: FaultRule = serde_json::from_value(json!({
            "kind": "server_error",
            "operation": "vm.listAll",
            "status": 403,
            "code": "AuthorizationFailed",
        }))?;
        let rule = arm.emulator.add_fault(forbidden);
        let listed = list_pool_vms(&arm.client, &input).await?;
        assert_eq!(
            listed
                .iter()
                .map(|vm| (vm.name.as_str(), vm.power_state.as_deref()))
                .collect::<Vec<_>>(),
            vec![("web-1", None)],
            "the pool is listed, its power states unknown"
        );
        assert_eq!(arm.emulator.stats().count("vm.listAll", 403), 1);
        arm.emulator.remove_fault(rule.id);

        // Any other failure of the statuses fails the listing, as the group's list would.
        let outage: FaultRule = serde_json::from_value(json!({
            "kind": "server_error",
            "operation": "vm.listAll",
            "status": 503,
            "code": "ServiceUnavailable",
        }))?;
        arm.emulator.add_fault(outage);
        let failed = list_pool_vms(&arm.client, &input).await;
        let Err(error) = failed else {
            panic!("an outage of the statuses is no error: {failed:?}");
        };
        let (_, type_name, non_retryable) = boundary(error);
        assert_eq!(type_name.as_deref(), Some("ListVms"));
        assert!(!non_retryable);
        Ok(())
    }

    #[tokio::test]
    async fn a_running_machine_is_restarted_and_redeployed_once_each() -> TestResult {
        let arm = Arm::start(50).await?;
        arm.create_vm(GROUP, "web-1", machine_tags("web", "web-1"))
            .await?;
        arm.emulator.reset_stats();
        for (kind, operation) in [
            (PowerAction::Restart, "vm.restart"),
            (PowerAction::Redeploy, "vm.redeploy"),
        ] {
            let handle = power::begin(&arm.client, kind, &action("web-1")).await?;
            assert!(
                handle.is_some(),
                "{operation}: ARM answers 202 with an operation"
            );
            let done =
                power::finish(&arm.client, kind, &action("web-1"), handle.as_ref(), WAIT).await?;
            assert_eq!(
                done,
                VmActionDone {
                    machine: "web-1".to_owned(),
                    action: kind.name().to_owned(),
                }
            );
            assert_eq!(arm.count(operation), 1, "{operation} sent once");
            assert_eq!(arm.emulator.stats().count(operation, 202), 1);
            arm.await_power(GROUP, "web-1", "running").await?;
        }
        Ok(())
    }

    /// Runs one attempt resuming `resumed`, returning its outcome and the heartbeat details it
    /// recorded.
    async fn attempt(
        arm: &Arm,
        resumed: Option<OperationHandle>,
    ) -> (
        Result<VmActionDone, MachineError>,
        Vec<Option<OperationHandle>>,
    ) {
        let beats = std::sync::Mutex::new(Vec::new());
        let outcome = power::attempt(
            &arm.client,
            PowerAction::Restart,
            &action("web-1"),
            resumed,
            |handle| {
                if let Ok(mut beats) = beats.lock() {
                    beats.push(handle);
                }
                std::future::ready(())
            },
        )
        .await;
        (outcome, beats.into_inner().unwrap_or_default())
    }

    #[tokio::test]
    async fn a_retried_attempt_waits_for_the_restart_sent_and_resends_only_a_failed_one()
    -> TestResult {
        let arm = Arm::start(50).await?;
        arm.create_vm(GROUP, "web-1", machine_tags("web", "web-1"))
            .await?;
        arm.emulator.reset_stats();

        // A first attempt sends the restart and records its operation before waiting.
        let (done, beats) = attempt(&arm, None).await;
        assert_eq!(done?.action, "restart");
        assert_eq!(arm.count("vm.restart"), 1);
        let Some(Some(sent)) = beats.first().cloned() else {
            panic!("the operation is not the first heartbeat detail: {beats:?}");
        };

        // An attempt after it (the worker lost, the wait timed out) polls it: no second restart.
        let (done, beats) = attempt(&arm, Some(sent.clone())).await;
        assert_eq!(done?.machine, "web-1");
        assert_eq!(arm.count("vm.restart"), 1, "not restarted twice");
        assert_eq!(beats.first(), Some(&Some(sent)));

        // An operation that ended Failed was reported; the attempt after it restarts anew.
        let failing: FaultRule = serde_json::from_value(json!({
            "kind": "fail_operation",
            "operation": "vm.restart",
            "code": "InternalOperationError",
            "count": 1,
        }))?;
        arm.emulator.add_fault(failing);
        let (failed, beats) = attempt(&arm, None).await;
        assert!(failed.is_err(), "the injected failure");
        let Some(Some(failed_operation)) = beats.first().cloned() else {
            panic!("no operation recorded: {beats:?}");
        };
        assert_eq!(arm.count("vm.restart"), 2);
        let (done, beats) = attempt(&arm, Some(failed_operation.clone())).await;
        assert_eq!(done?.action, "restart");
        assert_eq!(arm.count("vm.restart"), 3, "sent again after the failure");
        assert!(
            beats
                .iter()
                .flatten()
                .any(|handle| handle != &failed_operation),
            "the new operation is the detail now: {beats:?}"
        );
        arm.await_power(GROUP, "web-1", "running").await
    }

    #[tokio::test]
    async fn a_vm_not_this_clusters_machines_is_refused_and_not_touched() -> TestResult {
        let arm = Arm::start(50).await?;
        arm.create_vm(GROUP, "untagged", json!({})).await?;
        arm.create_vm(
            GROUP,
            "foreign",
            json!({ TAG_CLUSTER: "prod-weu", TAG_POOL: "web", TAG_MACHINE: "foreign" }),
        )
        .await?;
        arm.create_vm(GROUP, "renamed", machine_tags("web", "web-2"))
            .await?;
        arm.emulator.reset_stats();
        for name in ["untagged", "foreign", "renamed"] {
            for kind in [PowerAction::Restart, PowerAction::Redeploy] {
                let refused = power::begin(&arm.client, kind, &action(name)).await;
                let Err(error @ MachineError::NotOwned { .. }) = refused else {
                    panic!("{name}: not refused as not owned: {refused:?}");
                };
                let (message, type_name, non_retryable) = boundary(error);
                assert!(
                    message.starts_with(&format!("VM {name} exists but")),
                    "{message}"
                );
                assert!(message.contains(TAG_CLUSTER), "{message}");
                assert_eq!(type_name.as_deref(), Some("NotOwned"));
                assert!(non_retryable, "{name}");
            }
            arm.await_power(GROUP, name, "running").await?;
        }
        assert_eq!(arm.count("vm.restart") + arm.count("vm.redeploy"), 0);
        Ok(())
    }

    #[tokio::test]
    async fn a_missing_vm_fails_as_gone_without_retries() -> TestResult {
        let arm = Arm::start(50).await?;
        for kind in [PowerAction::Restart, PowerAction::Redeploy] {
            let gone = power::begin(&arm.client, kind, &action("web-ghost")).await;
            let Err(error @ MachineError::VmGone { .. }) = gone else {
                panic!("not gone: {gone:?}");
            };
            let (message, type_name, non_retryable) = boundary(error);
            assert!(message.starts_with("VM web-ghost is gone"), "{message}");
            assert_eq!(type_name.as_deref(), Some("VmGone"));
            assert!(non_retryable);
        }
        assert_eq!(arm.count("vm.restart") + arm.count("vm.redeploy"), 0);
        Ok(())
    }

    #[tokio::test]
    async fn azures_refusals_keep_their_classification() -> TestResult {
        let arm = Arm::start(50).await?;
        arm.create_vm(GROUP, "web-1", machine_tags("web", "web-1"))
            .await?;
        arm.power(GROUP, "web-1", "deallocate", "deallocated")
            .await?;
        // A restart of a deallocated VM: 409 OperationNotAllowed, Azure's message, no retry.
        let refused = power::begin(&arm.client, PowerAction::Restart, &action("web-1")).await;
        let Err(MachineError::Arm(error)) = refused else {
            panic!("not ARM's refusal: {refused:?}");
        };
        let failure = error.arm_failure().cloned();
        assert_eq!(
            failure.as_ref().map(|f| (f.status, f.code.as_str())),
            Some((409, "OperationNotAllowed"))
        );
        assert_eq!(error.disposition(), Disposition::Terminal);
        let (message, _, non_retryable) = boundary(MachineError::Arm(error));
        assert!(
            message.contains("requires the VM to be running"),
            "{message}"
        );
        assert!(non_retryable);

        // Another operation holding the VM: 409, retried.
        arm.create_vm(GROUP, "web-2", machine_tags("web", "web-2"))
            .await?;
        let busy: FaultRule = serde_json::from_value(json!({
            "kind": "conflict",
            "operation": "vm.redeploy",
            "code": "AnotherOperationInProgress",
            "count": 1,
        }))?;
        arm.emulator.add_fault(busy);
        let busy = power::begin(&arm.client, PowerAction::Redeploy, &action("web-2")).await;
        let Err(MachineError::Arm(error)) = busy else {
            panic!("not a conflict: {busy:?}");
        };
        assert_eq!(error.disposition(), Disposition::Retryable);
        let (_, type_name, non_retryable) = boundary(MachineError::Arm(error));
        assert_eq!(type_name.as_deref(), Some("VmAction"));
        assert!(!non_retryable);

        // An operation that ends Failed: an error with ARM's code.
        let failing: FaultRule = serde_json::from_value(json!({
            "kind": "fail_operation",
            "operation": "vm.restart",
            "code": "InternalOperationError",
            "count": 1,
        }))?;
        arm.emulator.add_fault(failing);
        let handle = power::begin(&arm.client, PowerAction::Restart, &action("web-2")).await?;
        let failed = power::finish(
            &arm.client,
            PowerAction::Restart,
            &action("web-2"),
            handle.as_ref(),
            WAIT,
        )
        .await;
        let Err(MachineError::Arm(error)) = failed else {
            panic!("the failed operation is no error: {failed:?}");
        };
        assert!(
            matches!(*error, ArmError::OperationFailed { .. }),
            "{error}"
        );
        assert_eq!(
            error.arm_failure().map(|f| f.code.clone()).as_deref(),
            Some("InternalOperationError")
        );
        Ok(())
    }
}
