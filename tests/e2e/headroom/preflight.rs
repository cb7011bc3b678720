//! `nodewright preflight --pool FILE` reports each pool's headroom through the running worker:
//! a pool of 4 with maxSurge 10 in a /28 (11 usable addresses) beside 3 NICs of someone else
//! has 8 free addresses for the 14 machines it may want at once; the text names the subnet
//! and the quotas, and the JSON carries the same figures.

use anyhow::{Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{KillableWorker, Sandbox, cli};
use nodewright_tests::temporal_worker::unique_task_queue;

use super::{pool_file_in, remove_network, small_network};
use crate::rollout::common::PoolShape;

const FOREIGN: usize = 3;

#[tokio::test]
async fn preflight_reports_the_free_addresses_and_quotas_of_each_pool() -> Result<()> {
    let stack = Stack::load()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("hrp");
    let suffix = unique_suffix();
    let network = format!("hrp{suffix}");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let outcome = match small_network(&stack, &sandbox, &network, "10.202.0.0/28", FOREIGN).await {
        Ok(subnet) => report(&stack, &task_queue, &format!("hrp{suffix}"), &subnet).await,
        Err(error) => Err(error),
    };
    remove_network(&stack, &sandbox, &network, FOREIGN).await;
    outcome.map_err(|error| error.context(worker.log_tail()))
}

async fn report(stack: &Stack, task_queue: &str, pool: &str, subnet: &str) -> Result<()> {
    let file = pool_file_in(
        stack,
        pool,
        &PoolShape::new(4, "10", "0"),
        subnet,
        "Standard_D2s_v5",
    )?;
    let file = file.to_string_lossy().into_owned();
    let text = cli(stack, task_queue, &["preflight", "--pool", &file]).await?;
    let text = &text.expect_code(0)?.stdout;
    for line in [
        format!("  headroom     pool {pool}\n"),
        "    subnet small: 8 free of 11 usable addresses\n".to_owned(),
        "    quota regional vCPUs: ".to_owned(),
        "    quota standardDSv5Family vCPUs: ".to_owned(),
        format!("    size: 2 vCPUs per machine in {}\n", stack.arm.location),
        "    fits: 8 of 14 machines at once (replicas and surge); subnet small: 8 free addresses, 14 needed\n".to_owned(),
    ] {
        ensure!(text.contains(&line), "preflight prints {line:?}:\n{text}");
    }
    let json = cli(
        stack,
        task_queue,
        &["preflight", "--pool", &file, "--output", "json"],
    )
    .await?
    .expect_code(0)?
    .json()?;
    let headroom = &json["report"]["headroom"][0];
    ensure!(
        headroom["pool"] == pool
            && headroom["wanted"] == 14
            && headroom["fit"]["machines"] == 8
            && headroom["reading"]["subnet"]["usable"] == 11
            && headroom["reading"]["subnet"]["used"] == 3,
        "the JSON report carries the figures: {headroom}"
    );
    Ok(())
}
