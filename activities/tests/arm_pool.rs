//! Listing a pool's VMs against the local stack's ARM emulator (the sandbox): VMs of the pool,
//! of another pool, of another cluster and untagged are created, and only the pool's come back,
//! with their template hash, creation time and provisioning state.
//!
//! Run with `cargo test -p nodewright-activities --test arm_pool` after `dev/stack up`. The
//! sandbox's endpoint, token, subscription, resource group and location come from the
//! environment (`NODEWRIGHT_ARM_ENDPOINT`, ...) or else from the stack's env file (`.run/env`);
//! without either the tests fail, saying the stack is needed.
//!
//! The resource group is shared with other tests, so every VM is named with a suffix unique to
//! the run, tagged for a cluster name unique to the run (a sweep of the stack's cluster never
//! sees them), made never to join the cluster by a fault rule (so the sandbox's node joiner
//! registers no Node for them), and deleted at the end whether the test passed or not. The
//! tests sit in a `#[cfg(test)]` module so the tidy test sees them as test code.

#[cfg(test)]
mod arm_pool {
    use nodewright_model::arm::poll_schedule::OperationKind;
    use std::collections::HashMap;
    use std::panic::AssertUnwindSafe;
    use std::path::PathBuf;
    use std::time::Duration;

    use futures::FutureExt;
    use nodewright_activities::azure::machines::ListPoolVms;
    use nodewright_activities::azure::machines::pool::list_pool_vms;
    use nodewright_activities::azure::virtual_machines::VirtualMachine;
    use nodewright_activities::azure::{ArmClient, ArmConfig, Credential, Deletion};
    use nodewright_model::ClusterName;
    use nodewright_model::ownership::{TAG_CLUSTER, TAG_CREATED, TAG_POOL, TAG_TEMPLATE};
    use nodewright_model::rollout::PoolVm;
    use serde_json::{Value, json};

    type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

    const OPERATION_WAIT: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn only_the_pools_vms_of_this_cluster_are_listed_with_template_and_creation_time()
    -> TestResult {
        let sandbox = Sandbox::from_stack()?;
        let run = Run::new();
        let fault = sandbox
            .add_fault(json!({ "kind": "never_joins", "vm": run.vm_glob() }))
            .await?;
        let outcome = AssertUnwindSafe(pool_scenario(&sandbox, &run))
            .catch_unwind()
            .await;
        run.clean(&sandbox).await;
        if let Err(error) = sandbox.remove_fault(fault).await {
            eprintln!("cleanup: fault rule {fault}: {error}");
        }
        match outcome {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    async fn pool_scenario(sandbox: &Sandbox, run: &Run) -> TestResult {
        let cluster = run.cluster.as_str();
        let other_cluster = format!("{cluster}-other");
        let newest = run.vm("web1");
        let oldest = run.vm("web2");
        let bare = run.vm("web3");
        let vms = [
            (
                newest.clone(),
                json!({ TAG_CLUSTER: cluster, TAG_POOL: "web", TAG_TEMPLATE: "t-new",
                        TAG_CREATED: "2026-01-02T03:04:05Z", "team": "shop" }),
            ),
            (
                oldest.clone(),
                json!({ TAG_CLUSTER: cluster, TAG_POOL: "web", TAG_TEMPLATE: "t-old",
                        TAG_CREATED: "2025-12-31T23:00:00+01:00" }),
            ),
            (
                bare.clone(),
                json!({ TAG_CLUSTER: cluster, TAG_POOL: "web" }),
            ),
            (
                run.vm("db1"),
                json!({ TAG_CLUSTER: cluster, TAG_POOL: "db", TAG_TEMPLATE: "t-new" }),
            ),
            (
                run.vm("foreign"),
                json!({ TAG_CLUSTER: other_cluster, TAG_POOL: "web", TAG_TEMPLATE: "t-new" }),
            ),
            (run.vm("untagged"), json!({})),
        ];
        for (name, tags) in &vms {
            sandbox.create_vm(run, name, tags.clone()).await?;
        }

        let input = ListPoolVms {
            cluster: run.cluster.clone(),
            pool: "web".to_owned(),
            instance_view: false,
            source: nodewright_activities::azure::machines::VmSource::ResourceGroup,
            expected: Vec::new(),
        };
        let listed = list_pool_vms(&sandbox.arm, &input).await?;
        let vm = |name: &str, template: &str, created_at: i64| PoolVm {
            name: name.to_owned(),
            template_hash: template.to_owned(),
            created_at,
            provisioning_state: "Succeeded".to_owned(),
            zone: None,
            drain_tag: None,
            power_state: None,
            capacity_type: None,
        };
        assert_eq!(
            listed,
            vec![
                vm(&newest, "t-new", 1_767_323_045),
                vm(&oldest, "t-old", 1_767_218_400),
                vm(&bare, "", 0),
            ]
        );

        let db = ListPoolVms {
            pool: "db".to_owned(),
            ..input.clone()
        };
        let names: Vec<String> = list_pool_vms(&sandbox.arm, &db)
            .await?
            .into_iter()
            .map(|vm| vm.name)
            .collect();
        assert_eq!(names, vec![run.vm("db1")]);
        let nobody = ListPoolVms {
            pool: "cache".to_owned(),
            ..input
        };
        assert!(list_pool_vms(&sandbox.arm, &nobody).await?.is_empty());
        Ok(())
    }

    /// One test's VMs: names and a cluster name with a suffix unique to the run.
    struct Run {
        suffix: String,
        cluster: ClusterName,
        created: std::sync::Mutex<Vec<String>>,
    }

    impl Run {
        fn new() -> Self {
            let suffix = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
            let cluster = ClusterName::parse("cluster", &format!("nwt-{suffix}"))
                .unwrap_or_else(|error| panic!("{error}"));
            Self {
                suffix,
                cluster,
                created: std::sync::Mutex::default(),
            }
        }

        fn vm(&self, what: &str) -> String {
            format!("nwt-vmpool-{what}-{}", self.suffix)
        }

        fn vm_glob(&self) -> String {
            format!("nwt-vmpool-*-{}", self.suffix)
        }

        fn remember(&self, name: &str) {
            if let Ok(mut created) = self.created.lock() {
                created.push(name.to_owned());
            }
        }

        /// Deletes every VM the run created (or tried to), logging (not failing on) errors.
        async fn clean(&self, sandbox: &Sandbox) {
            let names = self.created.lock().map(|c| c.clone()).unwrap_or_default();
            for name in names {
                if let Err(error) = sandbox.delete_vm(&name).await {
                    eprintln!("cleanup: deleting VM {name}: {error}");
                }
            }
        }
    }

    /// The stack's ARM emulator: nodewright's ARM client, and plain HTTP for the admin API.
    struct Sandbox {
        arm: ArmClient,
        http: reqwest::Client,
        endpoint: String,
        token: String,
        location: String,
    }

    impl Sandbox {
        fn from_stack() -> TestResult<Self> {
            let file = stack_env();
            let get = |key: &str| std::env::var(key).ok().or_else(|| file.get(key).cloned());
            let (Some(endpoint), Some(token), Some(subscription), Some(group), Some(location)) = (
                get("NODEWRIGHT_ARM_ENDPOINT"),
                get("NODEWRIGHT_ARM_TOKEN"),
                get("NODEWRIGHT_AZURE_SUBSCRIPTION_ID"),
                get("NODEWRIGHT_AZURE_RESOURCE_GROUP"),
                get("NODEWRIGHT_AZURE_LOCATION"),
            ) else {
                return Err(
                    "needs the local stack: the sandbox's settings are neither in the \
                            environment nor in .run/env; run `dev/stack up`, or `dev/test` which \
                            brings it up"
                        .into(),
                );
            };
            let config = ArmConfig::new(endpoint.parse()?, subscription, group);
            let arm = ArmClient::new(config, Credential::fixed(token.clone()))?;
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()?;
            Ok(Self {
                arm,
                http,
                endpoint: endpoint.trim_end_matches('/').to_owned(),
                token,
                location,
            })
        }

        /// Creates a VM with `tags` (no NIC, no OS disk) and waits until it is provisioned.
        async fn create_vm(&self, run: &Run, name: &str, tags: Value) -> TestResult {
            let body: VirtualMachine = serde_json::from_value(json!({
                "location": self.location,
                "tags": tags,
                "properties": { "hardwareProfile": { "vmSize": "Standard_D2s_v5" } },
            }))?;
            run.remember(name);
            let submitted = self.arm.put_vm(name, &body).await?;
            if let Some(operation) = &submitted.operation {
                self.arm
                    .wait(operation, OperationKind::VmCreate, OPERATION_WAIT)
                    .await?;
            }
            Ok(())
        }

        async fn delete_vm(&self, name: &str) -> TestResult {
            if let Deletion::Started(operation) = self.arm.delete_vm(name, false).await? {
                self.arm
                    .wait(&operation, OperationKind::VmDelete, OPERATION_WAIT)
                    .await?;
            }
            Ok(())
        }

        async fn add_fault(&self, rule: Value) -> TestResult<u64> {
            let response = self
                .http
                .post(format!("{}/sandbox/faults", self.endpoint))
                .bearer_auth(&self.token)
                .json(&rule)
                .send()
                .await?
                .error_for_status()?;
            let body: Value = response.json().await?;
            body["id"]
                .as_u64()
                .ok_or_else(|| format!("no fault id in {body}").into())
        }

        async fn remove_fault(&self, id: u64) -> TestResult {
            self.http
                .delete(format!("{}/sandbox/faults/{id}", self.endpoint))
                .bearer_auth(&self.token)
                .send()
                .await?
                .error_for_status()?;
            Ok(())
        }
    }

    /// The stack's env file (`$NODEWRIGHT_RUN_DIR/env`, else `.run/env`), as key-value pairs.
    fn stack_env() -> HashMap<String, String> {
        let run_dir = std::env::var_os("NODEWRIGHT_RUN_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.run"));
        std::fs::read_to_string(run_dir.join("env"))
            .map(|text| {
                text.lines()
                    .filter_map(|line| line.trim().split_once('='))
                    .map(|(key, value)| (key.to_owned(), value.to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    }
}
