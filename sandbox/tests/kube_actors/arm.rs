//! The real ARM emulator, in-process on `127.0.0.1:0`, for tests that drive the attacher or the
//! joiner through ARM requests (raw HTTP, as a client of Azure would).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use nodewright_sandbox::arm::{Emulator, EmulatorConfig, LatencyProfile, app};
use reqwest::Method;
use serde_json::{Value, json};

/// VM api-version.
const VM_API: &str = "2024-07-01";
const DISK_API: &str = "2024-03-02";

/// A running emulator, the resource group the test uses, and a client.
pub struct Arm {
    /// The emulator, for the actors (as their `Compute`) and for fault rules.
    pub emulator: Emulator,
    base: String,
    prefix: String,
    client: reqwest::Client,
}

/// One answer: status, `Azure-AsyncOperation` (when sent) and body.
pub struct Answer {
    pub status: u16,
    pub async_operation: Option<String>,
    pub body: Value,
}

impl Arm {
    /// The emulator with the short latency profile scaled by `scale`, serving resource group
    /// `kat` of `subscription`.
    pub async fn start(subscription: &str, scale: f64) -> Result<Self> {
        let emulator = Emulator::new(EmulatorConfig {
            latency: LatencyProfile::Short,
            latency_scale: scale,
            ..EmulatorConfig::default()
        })?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let router = app(emulator.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self {
            emulator,
            base: format!("http://{addr}"),
            prefix: format!("/subscriptions/{subscription}/resourceGroups/kat/providers"),
            client: reqwest::Client::new(),
        })
    }

    /// The id of VM `name`.
    pub fn vm_id(&self, name: &str) -> String {
        format!("{}/Microsoft.Compute/virtualMachines/{name}", self.prefix)
    }

    /// The id of disk `name`.
    pub fn disk_id(&self, name: &str) -> String {
        format!("{}/Microsoft.Compute/disks/{name}", self.prefix)
    }

    /// Sends a request to `path` (an id plus action and query) and reads the answer.
    pub async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Answer> {
        let url = if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}", self.base)
        };
        let mut request = self.client.request(method, url);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let async_operation = response
            .headers()
            .get("azure-asyncoperation")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = response.bytes().await?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        Ok(Answer {
            status,
            async_operation,
            body,
        })
    }

    /// Polls the operation of `answer` until it ends; fails unless it `Succeeded`.
    pub async fn succeed(&self, what: &str, answer: &Answer) -> Result<()> {
        if !(200..300).contains(&answer.status) {
            bail!("{what}: answered {} {}", answer.status, answer.body);
        }
        let url = answer
            .async_operation
            .as_deref()
            .with_context(|| format!("{what}: no Azure-AsyncOperation"))?;
        for _ in 0..600 {
            let op = self.send(Method::GET, url, None).await?;
            match op.body["status"].as_str() {
                Some("InProgress") => tokio::time::sleep(Duration::from_millis(50)).await,
                Some("Succeeded") => return Ok(()),
                _ => bail!("{what}: the operation ended {}", op.body),
            }
        }
        bail!("{what}: the operation did not end")
    }

    /// Creates an empty data disk.
    pub async fn create_disk(&self, name: &str) -> Result<()> {
        let body = json!({"location": "westeurope", "sku": {"name": "Premium_LRS"},
                          "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 8}});
        let path = format!("{}?api-version={DISK_API}", self.disk_id(name));
        let answer = self.send(Method::PUT, &path, Some(&body)).await?;
        self.succeed(&format!("creating disk {name}"), &answer)
            .await
    }

    /// Creates a VM whose computer name is `name`.
    pub async fn create_vm(&self, name: &str) -> Result<()> {
        let body = json!({
            "location": "westeurope",
            "zones": ["1"],
            "properties": {
                "hardwareProfile": {"vmSize": "Standard_D4s_v5"},
                "osProfile": {"computerName": name, "adminUsername": "azureuser"},
                "storageProfile": {"osDisk": {"createOption": "FromImage", "deleteOption": "Delete"}},
            },
        });
        let answer = self
            .send(Method::PUT, &self.vm(name, ""), Some(&body))
            .await?;
        self.succeed(&format!("creating VM {name}"), &answer).await
    }

    /// The URL path of VM `name`, with `action` (`/powerOff`, ...) and the api-version.
    pub fn vm(&self, name: &str, action: &str) -> String {
        format!("{}{action}?api-version={VM_API}", self.vm_id(name))
    }
}
