//! Azure Resource Graph (`POST /providers/Microsoft.ResourceGraph/resources`): VMs as rows with
//! their power state, filtered and shaped by the KQL subset, paged with `$skipToken`, refused
//! with 400 for what the emulator does not parse, and throttled at Azure's 15 queries per 5 s.

use serde_json::{Value, json};

use crate::support::*;

const GRAPH: &str = "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01";

fn pool_query(pool: &str) -> String {
    format!(
        "Resources | where type =~ 'microsoft.compute/virtualmachines' \
         | where resourceGroup =~ '{RG}' and tags['nodewright.io-pool'] == '{pool}' \
         | project id, name, tags, zones, provisioningState = properties.provisioningState, \
           powerState = properties.extended.instanceView.powerState.code \
         | order by name asc"
    )
}

fn names(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_pools_vms_come_back_as_rows_with_their_power_state_page_by_page() -> TestResult {
    let sb = Sandbox::start().await?;
    for name in ["g1", "g2", "g3"] {
        sb.create_vm(name, &vm_body(None, &[])).await?;
    }
    let mut other = vm_body(None, &[]);
    other["tags"] = json!({"nodewright.io-pool": "pool-b"});
    sb.create_vm("g4", &other).await?;
    let stopped = sb
        .post(
            &format!(
                "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachines/g2/deallocate?api-version={VM_API}"
            ),
            &json!({}),
        )
        .await?;
    sb.finish(&stopped).await?;

    let first = sb
        .post(
            GRAPH,
            &json!({"subscriptions": [SUB], "query": pool_query("pool-a"), "options": {"$top": 2}}),
        )
        .await?;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.body["totalRecords"], 3);
    assert_eq!(first.body["count"], 2);
    assert_eq!(names(&first.body), ["g1", "g2"]);
    let row = &first.body["data"][0];
    assert_eq!(
        row["id"].as_str().map(str::to_ascii_lowercase),
        Some(vm_id("g1").to_ascii_lowercase())
    );
    assert_eq!(row["powerState"], "PowerState/running");
    assert_eq!(row["provisioningState"], "Succeeded");
    assert_eq!(row["zones"], json!(["2"]));
    assert_eq!(row["tags"]["nodewright.io-pool"], "pool-a");
    assert_eq!(
        first.body["data"][1]["powerState"],
        "PowerState/deallocated"
    );
    let token = first.body["$skipToken"]
        .as_str()
        .ok_or("no $skipToken on a partial page")?;
    assert!(
        first.header("x-ms-user-quota-remaining").is_some(),
        "{first:?}"
    );

    let second = sb
        .post(
            GRAPH,
            &json!({"subscriptions": [SUB], "query": pool_query("pool-a"),
                    "options": {"$top": 2, "$skipToken": token}}),
        )
        .await?;
    assert_eq!(names(&second.body), ["g3"]);
    assert!(second.body.get("$skipToken").is_none(), "{:?}", second.body);

    let elsewhere = sb
        .post(
            GRAPH,
            &json!({"subscriptions": ["00000000-0000-0000-0000-00000000ffff"], "query": pool_query("pool-a")}),
        )
        .await?;
    assert_eq!(
        elsewhere.body["totalRecords"], 0,
        "another subscription's rows"
    );

    let whole = sb
        .post(
            GRAPH,
            &json!({"subscriptions": [SUB], "query": "Resources | limit 10"}),
        )
        .await?;
    let whole_row = &whole.body["data"][0];
    assert_eq!(whole_row["type"], "microsoft.compute/virtualmachines");
    assert_eq!(whole_row["resourceGroup"], RG.to_ascii_lowercase());
    assert_eq!(whole_row["subscriptionId"], SUB);
    assert!(
        whole_row["properties"]["osProfile"]
            .get("customData")
            .is_none(),
        "no secret in a row: {whole_row}"
    );
    Ok(())
}

#[tokio::test]
async fn a_query_the_emulator_does_not_parse_or_a_bad_option_is_refused_with_400() -> TestResult {
    let sb = Sandbox::start().await?;
    for (body, code, says) in [
        (
            json!({"query": "Resources | summarize count() by type"}),
            "BadRequest",
            "summarize",
        ),
        (
            json!({"query": "Resources | where name contains 'x'"}),
            "BadRequest",
            "contains",
        ),
        (
            json!({"query": "Resources", "options": {"$top": 5000}}),
            "InvalidParameter",
            "$top",
        ),
        (
            json!({"query": "Resources", "options": {"resultFormat": "table"}}),
            "InvalidParameter",
            "objectArray",
        ),
        (
            json!({"query": "Resources", "options": {"$skipToken": "nonsense"}}),
            "InvalidParameter",
            "skip token",
        ),
    ] {
        let refused = sb.post(GRAPH, &body).await?;
        assert_eq!(
            (refused.status, refused.code()),
            (400, code),
            "{body}: {refused:?}"
        );
        assert!(
            refused.body.to_string().contains(says),
            "{body}: {:?}",
            refused.body
        );
    }
    let old = sb
        .post(
            "/providers/microsoft.resourcegraph/resources?api-version=2019-04-01",
            &json!({"query": "Resources"}),
        )
        .await?;
    assert_eq!(
        (old.status, old.code()),
        (400, "InvalidApiVersionParameter")
    );
    Ok(())
}

#[tokio::test]
async fn more_than_fifteen_queries_in_five_seconds_are_throttled() -> TestResult {
    let sb = Sandbox::start().await?;
    let query = json!({"query": "Resources | limit 1"});
    let mut statuses = Vec::new();
    for _ in 0..16 {
        statuses.push(sb.post(GRAPH, &query).await?);
    }
    let answered = statuses.iter().filter(|r| r.status == 200).count();
    let last = statuses.last().ok_or("no answer")?;
    assert_eq!(answered, 15, "15 answered before the throttle");
    assert_eq!((last.status, last.code()), (429, "RateLimiting"));
    assert_eq!(last.header("x-ms-user-quota-remaining"), Some("0"));
    assert!(
        last.header("x-ms-user-quota-resets-after")
            .is_some_and(|after| after.starts_with("00:00:0")),
        "{last:?}"
    );
    Ok(())
}
