//! `GET /subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}/usages`: the
//! compute quotas of a subscription in a location and how much of each its VMs use, as Azure's
//! `ListUsagesResult`: `{"value":[{"unit":"Count","currentValue","limit","name":{"value",
//! "localizedValue"}}]}`, in one page. It lists availability sets and scale sets (the emulator
//! has none: 0 used), `cores` ("Total Regional vCPUs"), `virtualMachines`, `lowPriorityCores`
//! (Spot) and each size family of the catalog (`standardDSv5Family`, "Standard DSv5 Family
//! vCPUs"). Limits come from the quota configuration; usage counts every VM in the location
//! whatever its power state (see `quota.rs`).

use axum::Router;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};

use super::api_versions::{USAGES, check_version};
use super::emulator::Emulator;
use super::error::ArmError;
use super::http::{Ctx, json_response};
use super::quota::Usage;
use super::sizes;

const PATH: &str = "/subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}/usages";

/// The default limit Azure reports for availability sets and scale sets per location.
const SETS_LIMIT: u64 = 2_500;

/// The usages route.
pub fn routes() -> Router<Emulator> {
    Router::new().route(PATH, get(list))
}

async fn list(
    AxState(em): AxState<Emulator>,
    Path((sub, location)): Path<(String, String)>,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    check_version(&USAGES, &ctx.api_version)?;
    let (usage, limits) = em.read(|core| {
        (
            Usage::of(&core.state, &sub, &location, None),
            core.quota.limits(&location),
        )
    });
    let mut value = vec![
        entry("availabilitySets", "Availability Sets", 0, SETS_LIMIT),
        entry(
            "cores",
            "Total Regional vCPUs",
            usage.regional_vcpus,
            limits.regional_vcpus,
        ),
        entry(
            "virtualMachines",
            "Virtual Machines",
            usage.virtual_machines,
            limits.virtual_machines,
        ),
        entry(
            "virtualMachineScaleSets",
            "Virtual Machine Scale Sets",
            0,
            SETS_LIMIT,
        ),
        entry(
            "lowPriorityCores",
            "Total Regional Low-priority vCPUs",
            usage.low_priority_vcpus,
            limits.low_priority_vcpus,
        ),
    ];
    value.extend(sizes::families().into_iter().map(|family| {
        entry(
            family,
            &sizes::family_display_name(family),
            usage.family(family),
            limits.family(family),
        )
    }));
    Ok(json_response(
        StatusCode::OK,
        json!({ "value": value }),
        None,
    ))
}

fn entry(name: &str, display: &str, current: u64, limit: u64) -> Value {
    json!({
        "unit": "Count",
        "currentValue": current,
        "limit": limit,
        "name": {"value": name, "localizedValue": display},
    })
}
