//! Headroom reads against the ARM emulator (the sandbox) run in-process: a subnet's free
//! addresses from its network's usages, the regional and family vCPU quotas from the compute
//! usages, the size's vCPUs and restricted zones from the SKUs (read once, then kept), and a
//! refusal that keeps its classification.
//!
//! The tests sit in a `#[cfg(test)]` module so the tidy test sees them as test code.

#[cfg(test)]
mod arm_headroom {
    use std::sync::Arc;

    use nodewright_activities::azure::headroom::HeadroomActivities;
    use nodewright_activities::azure::{ArmClient, ArmConfig, Credential};
    use nodewright_model::headroom::{Buffer, HeadroomQuestion, Restriction, cut};
    use nodewright_sandbox::arm::{Emulator, EmulatorConfig, LatencyProfile, app};
    use serde_json::{Value, json};

    type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

    const SUBSCRIPTION: &str = "00000000-0000-0000-0000-0000000000b8";
    const GROUP: &str = "machines";
    const NET_API: &str = "api-version=2024-03-01";

    struct Arm {
        emulator: Emulator,
        client: ArmClient,
        http: reqwest::Client,
        base: String,
    }

    impl Arm {
        async fn start() -> TestResult<Self> {
            let emulator = Emulator::new(EmulatorConfig {
                latency: LatencyProfile::Instant,
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

        fn network_id(&self) -> String {
            format!(
                "/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}/providers/Microsoft.Network/virtualNetworks/net"
            )
        }

        fn subnet_id(&self) -> String {
            format!("{}/subnets/small", self.network_id())
        }

        async fn put(&self, path: &str, body: &Value) -> TestResult<Value> {
            let answer = self
                .http
                .put(format!("{}{path}", self.base))
                .bearer_auth("test-token")
                .json(body)
                .send()
                .await?;
            let status = answer.status();
            let body: Value = answer.json().await.unwrap_or(Value::Null);
            assert!(status.is_success(), "PUT {path}: {status} {body}");
            Ok(body)
        }

        async fn get(&self, path: &str) -> TestResult<Value> {
            Ok(self
                .http
                .get(format!("{}{path}", self.base))
                .bearer_auth("test-token")
                .send()
                .await?
                .json()
                .await?)
        }

        /// A network with subnet `small` (a /29: 3 usable addresses) holding `nics` NICs.
        async fn small_subnet_with(&self, nics: usize) -> TestResult {
            let network = self.network_id();
            self.put(
                &format!("{network}?{NET_API}"),
                &json!({"location": "westeurope", "properties": {
                    "addressSpace": {"addressPrefixes": ["10.9.0.0/16"]},
                    "subnets": [{"name": "small", "properties": {"addressPrefix": "10.9.0.0/29"}}]}}),
            )
            .await?;
            self.get(&format!("{network}?{NET_API}")).await?;
            for n in 0..nics {
                let nic = format!(
                    "/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}/providers/Microsoft.Network/networkInterfaces/nic-{n}"
                );
                self.put(
                    &format!("{nic}?{NET_API}"),
                    &json!({"location": "westeurope", "properties": {"ipConfigurations": [
                        {"name": "ipconfig1", "properties": {"subnet": {"id": self.subnet_id()}}}]}}),
                )
                .await?;
                self.get(&format!("{nic}?{NET_API}")).await?;
            }
            Ok(())
        }

        async fn sku_reads(&self) -> TestResult<u64> {
            let stats = self.get("/sandbox/stats").await?;
            Ok(stats["by_operation"]["sku.list"]["200"]
                .as_u64()
                .unwrap_or(0))
        }
    }

    fn question(subnet_id: String, zones: &[&str]) -> HeadroomQuestion {
        HeadroomQuestion {
            subnet_id,
            vm_size: "Standard_D4s_v5".to_owned(),
            zones: zones.iter().map(|z| (*z).to_owned()).collect(),
        }
    }

    #[tokio::test]
    async fn the_subnet_quotas_and_size_are_read_and_the_skus_kept() -> TestResult {
        let arm = Arm::start().await?;
        arm.small_subnet_with(1).await?;
        arm.put(
            "/sandbox/quota",
            &json!({"regional_vcpus": 20, "families": {"standardDSv5Family": 12},
                    "restrictions": [{"size": "Standard_D4s_v5", "location": "westeurope", "zones": ["2"]}]}),
        )
        .await?;
        let activities = Arc::new(HeadroomActivities::new(arm.client.clone(), "westeurope"));
        let question = question(arm.subnet_id(), &["1", "2", "3"]);

        let reading = activities.read(&question).await?;
        let subnet = reading.subnet.clone().ok_or("the subnet's usage")?;
        assert_eq!(
            (subnet.name.as_str(), subnet.usable, subnet.used),
            ("small", 3, 1)
        );
        let quotas: Vec<(&str, u64, u64)> = reading
            .quotas
            .iter()
            .map(|q| (q.name.as_str(), q.limit, q.used))
            .collect();
        assert_eq!(
            quotas,
            [
                ("regional vCPUs", 20, 0),
                ("standardDSv5Family vCPUs", 12, 0)
            ]
        );
        assert_eq!(reading.vcpus, 4);
        assert_eq!(
            reading.restrictions,
            [Restriction {
                zones: vec!["2".to_owned()],
                reason: "NotAvailableForSubscription".to_owned()
            }]
        );
        // Ten wanted: the subnet has 2 free addresses, the family quota room for 3 machines.
        let batch = cut(10, &question, &reading, Buffer::default(), 0);
        assert_eq!(batch.machines, 2);
        assert_eq!(batch.zones, ["1", "3"]);
        assert_eq!(
            batch.limit.map(|l| l.message()).as_deref(),
            Some("subnet small: 2 free addresses, 10 needed")
        );

        // The SKUs were read once; a second read keeps them.
        assert_eq!(arm.sku_reads().await?, 1);
        activities.read(&question).await?;
        assert_eq!(arm.sku_reads().await?, 1);
        drop(arm.emulator);
        Ok(())
    }

    #[tokio::test]
    async fn without_the_networks_read_the_subnet_itself_is_read() -> TestResult {
        let arm = Arm::start().await?;
        arm.small_subnet_with(2).await?;
        // A role assigned at the subnet's scope: the network's usages answer 403.
        let answer = arm
            .http
            .post(format!("{}/sandbox/faults", arm.base))
            .json(
                &json!({"kind": "server_error", "status": 403, "code": "AuthorizationFailed",
                          "operation": "vnet.usages"}),
            )
            .send()
            .await?;
        assert!(answer.status().is_success(), "{}", answer.text().await?);
        let activities = HeadroomActivities::new(arm.client.clone(), "westeurope");
        let reading = activities.read(&question(arm.subnet_id(), &[])).await?;
        let subnet = reading.subnet.ok_or("the subnet's usage")?;
        assert_eq!(
            (subnet.name.as_str(), subnet.usable, subnet.used),
            ("small", 3, 2)
        );
        let stats = arm.get("/sandbox/stats").await?;
        assert_eq!(stats["by_operation"]["vnet.usages"]["403"], 1, "{stats}");
        assert_eq!(stats["by_operation"]["subnet.get"]["200"], 1, "{stats}");
        Ok(())
    }

    #[tokio::test]
    async fn a_size_the_location_does_not_offer_is_restricted_and_an_unknown_subnet_unread()
    -> TestResult {
        let arm = Arm::start().await?;
        arm.small_subnet_with(0).await?;
        let activities = HeadroomActivities::new(arm.client.clone(), "westeurope");
        let mut asked = question(format!("{}/subnets/other", arm.network_id()), &[]);
        asked.vm_size = "Standard_Nonesuch_v9".to_owned();
        let reading = activities.read(&asked).await?;
        assert_eq!(reading.subnet, None);
        let batch = cut(3, &asked, &reading, Buffer::default(), 0);
        assert_eq!(batch.machines, 0);
        assert_eq!(
            batch.limit.map(|l| l.message()).as_deref(),
            Some("size Standard_Nonesuch_v9 is restricted in westeurope (NotOfferedInLocation)")
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_network_that_is_not_there_fails_without_retry_and_names_it() -> TestResult {
        let arm = Arm::start().await?;
        let activities = HeadroomActivities::new(arm.client.clone(), "westeurope");
        let error = activities
            .read(&question(arm.subnet_id(), &[]))
            .await
            .err()
            .ok_or("a missing network fails")?;
        let text = nodewright_model::text::error_chain(&error);
        assert!(
            text.contains("reading the usages of virtual network"),
            "{text}"
        );
        // Not retried: a 404 does not heal by itself.
        assert_ne!(
            error.disposition(),
            nodewright_model::arm::Disposition::Retryable,
            "{text}"
        );
        Ok(())
    }
}
