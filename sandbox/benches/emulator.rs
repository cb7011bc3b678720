//! Emulator benchmark: requests per second the ARM emulator serves on this machine, as ratios
//! against `/healthz` (the same axum server doing no work) measured in the same run, and the
//! ARM requests one VM create → delete costs through nodewright's own client, as the stats
//! endpoint counts them.
//!
//! Run: `cargo bench -p nodewright-sandbox --bench emulator` (prints figures, asserts nothing).

use std::time::{Duration, Instant};

use nodewright_activities::azure::OperationKind;
use nodewright_activities::azure::{ArmClient, ArmConfig, Credential, Deletion};
use nodewright_sandbox::arm::{Emulator, EmulatorConfig, LatencyProfile, app};
use serde_json::{Value, json};

const SUBSCRIPTION: &str = "00000000-0000-0000-0000-0000000000be";
const RESOURCE_GROUP: &str = "bench";
const VM_API: &str = "api-version=2024-07-01";
const CONCURRENCY: usize = 8;
const MEASURE_FOR: Duration = Duration::from_secs(3);
const LISTED_VMS: usize = 1000;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[tokio::main]
async fn main() -> Result<()> {
    let instant = serve(EmulatorConfig {
        latency: LatencyProfile::Instant,
        ..EmulatorConfig::default()
    })
    .await?;
    let http = reqwest::Client::new();
    let vms = format!(
        "{}/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.Compute/virtualMachines",
        instant.base
    );

    println!(
        "emulator throughput ({CONCURRENCY} concurrent clients, {MEASURE_FOR:?} each, release build)"
    );
    let healthz = requests_per_second(&http, &format!("{}/healthz", instant.base)).await?;
    println!("  GET /healthz (baseline)      {healthz:>9.0} req/s  1.00x");

    put_vm(&http, &vms, "bench-0").await?;
    let get_vm = requests_per_second(&http, &format!("{vms}/bench-0?{VM_API}")).await?;
    println!(
        "  GET VM                       {get_vm:>9.0} req/s  {:.2}x of baseline",
        get_vm / healthz
    );

    for index in 1..LISTED_VMS {
        put_vm(&http, &vms, &format!("bench-{index}")).await?;
    }
    let (lists, pages) = lists_per_second(&http, &format!("{vms}?{VM_API}")).await?;
    println!(
        "  list {LISTED_VMS} VMs ({pages} pages)     {lists:>9.2} lists/s = {:.0} pages/s, {:.2}x of baseline per request",
        lists * pages as f64,
        lists * pages as f64 / healthz
    );

    // One VM's life through nodewright's ARM client, with the latencies the e2e tests use.
    let short = serve(EmulatorConfig {
        latency: LatencyProfile::Short,
        ..EmulatorConfig::default()
    })
    .await?;
    let started = Instant::now();
    create_then_delete(&short.base).await?;
    let stats = serde_json::to_value(short.emulator.stats())?;
    println!(
        "\nARM requests for one VM create -> delete (NIC + VM, `short` latencies, {:.1}s): {}",
        started.elapsed().as_secs_f64(),
        stats["total"]
    );
    if let Some(by_operation) = stats["by_operation"].as_object() {
        for (operation, by_status) in by_operation {
            println!("  {operation:<28} {by_status}");
        }
    }
    Ok(())
}

/// An emulator served on an ephemeral port.
struct Served {
    base: String,
    emulator: Emulator,
}

async fn serve(config: EmulatorConfig) -> Result<Served> {
    let emulator = Emulator::new(config)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let router = app(emulator.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(Served { base, emulator })
}

async fn put_vm(http: &reqwest::Client, vms: &str, name: &str) -> Result<()> {
    let body = json!({
        "location": "westeurope",
        "properties": {
            "hardwareProfile": { "vmSize": "Standard_D2s_v5" },
            "storageProfile": { "osDisk": { "createOption": "FromImage", "deleteOption": "Delete" } },
            "osProfile": { "computerName": name, "adminUsername": "bench" },
        },
    });
    let status = http
        .put(format!("{vms}/{name}?{VM_API}"))
        .json(&body)
        .send()
        .await?
        .status();
    if !status.is_success() {
        return Err(format!("PUT VM {name}: {status}").into());
    }
    Ok(())
}

/// Requests per second for GETs of `url` from `CONCURRENCY` clients over `MEASURE_FOR`.
async fn requests_per_second(http: &reqwest::Client, url: &str) -> Result<f64> {
    let started = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..CONCURRENCY {
        let (http, url) = (http.clone(), url.to_owned());
        clients.push(tokio::spawn(async move {
            let mut served = 0u64;
            while started.elapsed() < MEASURE_FOR {
                let response = http.get(&url).send().await?;
                if !response.status().is_success() {
                    return Err(format!("GET {url}: {}", response.status()).into());
                }
                response.bytes().await?;
                served += 1;
            }
            Result::Ok(served)
        }));
    }
    let mut total = 0;
    for client in clients {
        total += client.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// Complete listings (every page, following `nextLink`) per second, one client; and pages each.
async fn lists_per_second(http: &reqwest::Client, first_page: &str) -> Result<(f64, usize)> {
    let started = Instant::now();
    let (mut lists, mut pages) = (0u64, 0usize);
    while started.elapsed() < MEASURE_FOR {
        let (mut next, mut seen) = (Some(first_page.to_owned()), 0usize);
        pages = 0;
        while let Some(url) = next {
            let page: Value = http.get(&url).send().await?.json().await?;
            seen += page["value"].as_array().map_or(0, Vec::len);
            next = page["nextLink"].as_str().map(str::to_owned);
            pages += 1;
        }
        if seen != LISTED_VMS {
            return Err(format!("a listing returned {seen} VMs, expected {LISTED_VMS}").into());
        }
        lists += 1;
    }
    Ok((lists as f64 / started.elapsed().as_secs_f64(), pages))
}

/// Creates a NIC and a VM using it, waits for both, then deletes the VM (cascading to the NIC and
/// OS disk) and waits for that, all through `ArmClient`.
async fn create_then_delete(base: &str) -> Result<()> {
    let config = ArmConfig::new(base.parse()?, SUBSCRIPTION, RESOURCE_GROUP);
    let arm = ArmClient::new(config, Credential::fixed("bench"))?;
    let wait = Duration::from_secs(60);
    let nic = serde_json::from_value(json!({
        "location": "westeurope",
        "properties": { "ipConfigurations": [{ "name": "ipconfig1", "properties": {
            "subnet": { "id": format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.Network/virtualNetworks/v/subnets/s") },
        }}]},
    }))?;
    if let Some(operation) = arm.put_nic("life-nic", &nic).await?.operation {
        arm.wait(&operation, OperationKind::Nic, wait).await?;
    }
    let vm = serde_json::from_value(json!({
        "location": "westeurope",
        "properties": {
            "hardwareProfile": { "vmSize": "Standard_D2s_v5" },
            "storageProfile": { "osDisk": { "createOption": "FromImage", "deleteOption": "Delete" } },
            "osProfile": { "computerName": "life", "adminUsername": "bench" },
            "networkProfile": { "networkInterfaces": [{ "id": arm.nic_id("life-nic"),
                "properties": { "primary": true, "deleteOption": "Delete" } }] },
        },
    }))?;
    if let Some(operation) = arm.put_vm("life", &vm).await?.operation {
        arm.wait(&operation, OperationKind::VmCreate, wait).await?;
    }
    arm.get_vm("life").await?;
    if let Deletion::Started(operation) = arm.delete_vm("life", false).await? {
        arm.wait(&operation, OperationKind::VmDelete, wait).await?;
    }
    Ok(())
}
