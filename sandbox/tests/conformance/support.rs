//! Test harness: starts `arm::app()` on `127.0.0.1:0` and speaks raw HTTP to it with reqwest.

use std::time::Duration;

use nodewright_sandbox::arm::{Emulator, EmulatorConfig, LatencyProfile, app};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

/// What every test returns.
pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;
/// A fallible helper's result.
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The subscription every test uses.
pub const SUB: &str = "00000000-0000-0000-0000-000000000001";
/// The resource group every test uses.
pub const RG: &str = "rg-conformance";
/// VM api-version.
pub const VM_API: &str = "2024-07-01";
/// Disk api-version.
pub const DISK_API: &str = "2024-03-02";
/// NIC api-version.
pub const NIC_API: &str = "2024-03-01";

/// A running emulator and a client for it.
pub struct Sandbox {
    /// `http://127.0.0.1:port`.
    pub base: String,
    /// The emulator (for `Compute` tests).
    pub emulator: Emulator,
    client: reqwest::Client,
    token: Option<String>,
}

/// One answer.
#[derive(Debug)]
pub struct Resp {
    /// HTTP status.
    pub status: u16,
    /// Headers.
    pub headers: HeaderMap,
    /// JSON body, `Null` when empty.
    pub body: Value,
}

impl Resp {
    /// A header as a string.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The ARM error code of the body.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }

    /// `properties.provisioningState`.
    pub fn state(&self) -> &str {
        self.body["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default()
    }
}

/// The instant profile: every operation completes on the next request.
pub fn instant() -> EmulatorConfig {
    EmulatorConfig {
        latency: LatencyProfile::Instant,
        ..EmulatorConfig::default()
    }
}

/// The short profile scaled by `scale`.
pub fn short(scale: f64) -> EmulatorConfig {
    EmulatorConfig {
        latency: LatencyProfile::Short,
        latency_scale: scale,
        ..EmulatorConfig::default()
    }
}

/// The id of VM `name`.
pub fn vm_id(name: &str) -> String {
    format!(
        "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachines/{name}"
    )
}
/// The id of disk `name`.
pub fn disk_id(name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/disks/{name}")
}
/// The id of NIC `name`.
pub fn nic_id(name: &str) -> String {
    format!(
        "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Network/networkInterfaces/{name}"
    )
}
/// The VM URL path with its api-version.
pub fn vm(name: &str) -> String {
    format!("{}?api-version={VM_API}", vm_id(name))
}
/// The disk URL path with its api-version.
pub fn disk(name: &str) -> String {
    format!("{}?api-version={DISK_API}", disk_id(name))
}
/// The NIC URL path with its api-version.
pub fn nic(name: &str) -> String {
    format!("{}?api-version={NIC_API}", nic_id(name))
}

/// A VM body using `nic` (when given), an OS disk from an image, and `data` disks.
pub fn vm_body(nic: Option<&str>, data: &[&str]) -> Value {
    let data: Vec<Value> = data
        .iter()
        .enumerate()
        .map(|(lun, d)| json!({"lun": lun, "createOption": "Attach", "managedDisk": {"id": disk_id(d)}, "deleteOption": "Detach"}))
        .collect();
    let mut body = json!({
        "location": "westeurope",
        "zones": ["2"],
        "tags": {"nodewright.io-pool": "pool-a"},
        "properties": {
            "hardwareProfile": {"vmSize": "Standard_D4s_v5"},
            "osProfile": {"computerName": "node-a", "adminUsername": "azureuser", "customData": "aGVsbG8gd29ybGQ="},
            "storageProfile": {
                "imageReference": {"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest"},
                "osDisk": {"createOption": "FromImage", "deleteOption": "Delete", "managedDisk": {"storageAccountType": "Premium_LRS"}},
                "dataDisks": data,
            },
            "networkProfile": {"networkInterfaces": []},
        },
    });
    if let Some(nic) = nic {
        body["properties"]["networkProfile"]["networkInterfaces"] =
            json!([{"id": nic_id(nic), "properties": {"primary": true, "deleteOption": "Delete"}}]);
    }
    body
}

impl Sandbox {
    /// The emulator with the instant profile.
    pub async fn start() -> Res<Self> {
        Self::start_with(instant()).await
    }

    /// The emulator with `config`.
    pub async fn start_with(config: EmulatorConfig) -> Res<Self> {
        let token = config.token.clone();
        let emulator = Emulator::new(config)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let router = app(emulator.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self {
            base: format!("http://{addr}"),
            emulator,
            client: reqwest::Client::new(),
            token,
        })
    }

    /// Sends a request to `path` (relative) or an absolute URL, with extra headers.
    pub async fn send_with(
        &self,
        method: Method,
        path_or_url: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Res<Resp> {
        let url = if path_or_url.starts_with("http") {
            path_or_url.to_owned()
        } else {
            format!("{}{path_or_url}", self.base)
        };
        let mut request = self.client.request(method, url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        Ok(Resp {
            status,
            headers,
            body,
        })
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Res<Resp> {
        self.send_with(Method::GET, path, None, &[]).await
    }
    /// PUT with a JSON body.
    pub async fn put(&self, path: &str, body: &Value) -> Res<Resp> {
        self.send_with(Method::PUT, path, Some(body), &[]).await
    }
    /// PATCH with a JSON body.
    pub async fn patch(&self, path: &str, body: &Value) -> Res<Resp> {
        self.send_with(Method::PATCH, path, Some(body), &[]).await
    }
    /// POST with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Res<Resp> {
        self.send_with(Method::POST, path, Some(body), &[]).await
    }
    /// DELETE.
    pub async fn delete(&self, path: &str) -> Res<Resp> {
        self.send_with(Method::DELETE, path, None, &[]).await
    }

    /// Polls an `Azure-AsyncOperation` URL until it is terminal; returns the final body.
    pub async fn wait_async(&self, url: &str) -> Res<Value> {
        for _ in 0..400 {
            let op = self.get(url).await?;
            if op.status != 200 {
                return Err(format!("operation poll answered {}", op.status).into());
            }
            if op.body["status"] != "InProgress" {
                return Ok(op.body);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Err("operation did not finish".into())
    }

    /// Polls until the operation behind `resp` finishes; returns its final body.
    pub async fn finish(&self, resp: &Resp) -> Res<Value> {
        let url = resp
            .header("azure-asyncoperation")
            .ok_or("no Azure-AsyncOperation header")?
            .to_owned();
        self.wait_async(&url).await
    }

    /// Creates a NIC and waits for it.
    pub async fn create_nic(&self, name: &str) -> TestResult {
        let body = json!({"location": "westeurope", "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {"subnet": {"id": "/subscriptions/x/subnets/s"}}}]}});
        let resp = self.put(&nic(name), &body).await?;
        assert_eq!(resp.status, 201, "{resp:?}");
        assert_eq!(self.finish(&resp).await?["status"], "Succeeded");
        Ok(())
    }

    /// Creates an empty disk and waits for it.
    pub async fn create_disk(&self, name: &str) -> TestResult {
        let body = json!({"location": "westeurope", "sku": {"name": "Premium_LRS"}, "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 64}});
        let resp = self.put(&disk(name), &body).await?;
        assert_eq!(resp.status, 202, "{resp:?}");
        assert_eq!(self.finish(&resp).await?["status"], "Succeeded");
        Ok(())
    }

    /// Creates a VM with `body` and waits until it succeeded.
    pub async fn create_vm(&self, name: &str, body: &Value) -> TestResult {
        let resp = self.put(&vm(name), body).await?;
        assert_eq!(resp.status, 201, "{resp:?}");
        let done = self.finish(&resp).await?;
        assert_eq!(done["status"], "Succeeded", "{done}");
        Ok(())
    }

    /// A NIC `<name>-nic` and a VM using it.
    pub async fn create_vm_with_nic(&self, name: &str, data: &[&str]) -> TestResult {
        let nic_name = format!("{name}-nic");
        self.create_nic(&nic_name).await?;
        self.create_vm(name, &vm_body(Some(&nic_name), data)).await
    }
}
