//! Marketplace images (`Microsoft.Compute/locations/{location}/publishers/...`), read-only as in
//! Azure, from the catalog in `state/images.rs`; and the admin routes that publish and withdraw
//! versions while the emulator runs.
//!
//! - `GET …/publishers`, `…/publishers/{p}/artifacttypes/vmimage/offers`, `…/offers/{o}/skus`,
//!   `…/skus/{s}/versions` answer a bare JSON array of `{name, location, id}` (ARM's
//!   `VirtualMachineImageResource`); the versions list takes `$top`, `$orderby=name [asc|desc]`
//!   (versions ordered by their numbers) and `$expand=Properties` (each version whole, as its GET
//!   answers it). An offer, SKU or version list with nothing under it
//!   is 404 `NotFound`, "Artifact: VMImage was not found.", as Azure answers it.
//! - `GET …/versions/{version}`: the `VirtualMachineImage` (`osDiskImage.operatingSystem`,
//!   `hyperVGeneration`, `architecture`, …); 404 `NotFound` likewise.
//! - `PUT /sandbox/images/{publisher}/{offer}/{sku}/{version}` with an optional body
//!   `{"location"?, "osType"?, "hyperVGeneration"?, "architecture"?}` publishes a version (201,
//!   or 200 replacing one); `DELETE` withdraws it (204, 404 when absent); `GET /sandbox/images`
//!   lists the catalog as `{"images":[…]}`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use serde::Deserialize;
use serde_json::{Value, json};

use super::emulator::Emulator;
use super::error::ArmError;
use super::http::{Ctx, json_response};
use super::state::images::{MarketplaceImage, check_properties, is_version};

const PUBLISHERS: &str =
    "/subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}/publishers";
const OFFERS: &str = "/{publisher}/artifacttypes/vmimage/offers";

/// The marketplace image routes and their admin routes.
pub fn routes() -> Router<Emulator> {
    let offers = format!("{PUBLISHERS}{OFFERS}");
    Router::new()
        .route(PUBLISHERS, get(publishers))
        .route(&offers, get(list_offers))
        .route(&format!("{offers}/{{offer}}/skus"), get(skus))
        .route(
            &format!("{offers}/{{offer}}/skus/{{sku}}/versions"),
            get(versions),
        )
        .route(
            &format!("{offers}/{{offer}}/skus/{{sku}}/versions/{{version}}"),
            get(version),
        )
        .route("/sandbox/images", get(catalog))
        .route(
            "/sandbox/images/{publisher}/{offer}/{sku}/{version}",
            put(publish).delete(withdraw),
        )
}

/// The id prefix of a location's images, spelled as Azure spells it.
fn location_id(sub: &str, location: &str) -> String {
    format!("/Subscriptions/{sub}/Providers/Microsoft.Compute/Locations/{location}")
}

fn not_found() -> ArmError {
    ArmError::rejected(404, "NotFound", "Artifact: VMImage was not found.")
}

/// A `VirtualMachineImageResource` per distinct name (case-insensitively), in name order.
fn resources(names: Vec<String>, location: &str, id_of: impl Fn(&str) -> String) -> Vec<Value> {
    let mut names = names;
    names.sort_by_key(|n| n.to_ascii_lowercase());
    names.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    names
        .iter()
        .map(|name| json!({"name": name, "location": location, "id": id_of(name)}))
        .collect()
}

/// The images offered in `location` that `keep` accepts.
fn offered(
    em: &Emulator,
    location: &str,
    keep: impl Fn(&MarketplaceImage) -> bool,
) -> Vec<MarketplaceImage> {
    em.read(|core| {
        core.state
            .images
            .images
            .iter()
            .filter(|i| i.offered_in(location) && keep(i))
            .cloned()
            .collect()
    })
}

async fn publishers(
    AxState(em): AxState<Emulator>,
    Path((sub, location)): Path<(String, String)>,
    _ctx: Ctx,
) -> Response {
    let names = offered(&em, &location, |_| true)
        .into_iter()
        .map(|i| i.publisher)
        .collect();
    let base = location_id(&sub, &location);
    let body = resources(names, &location, |p| format!("{base}/Publishers/{p}"));
    json_response(StatusCode::OK, Value::Array(body), None)
}

async fn list_offers(
    AxState(em): AxState<Emulator>,
    Path((sub, location, publisher)): Path<(String, String, String)>,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let found = offered(&em, &location, |i| {
        i.publisher.eq_ignore_ascii_case(&publisher)
    });
    if found.is_empty() {
        return Err(not_found());
    }
    let base = location_id(&sub, &location);
    let names = found.into_iter().map(|i| i.offer).collect();
    let body = resources(names, &location, |o| {
        format!("{base}/Publishers/{publisher}/ArtifactTypes/VMImage/Offers/{o}")
    });
    Ok(json_response(StatusCode::OK, Value::Array(body), None))
}

async fn skus(
    AxState(em): AxState<Emulator>,
    Path((sub, location, publisher, offer)): Path<(String, String, String, String)>,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let found = offered(&em, &location, |i| {
        i.publisher.eq_ignore_ascii_case(&publisher) && i.offer.eq_ignore_ascii_case(&offer)
    });
    if found.is_empty() {
        return Err(not_found());
    }
    let base = location_id(&sub, &location);
    let names = found.into_iter().map(|i| i.sku).collect();
    let body = resources(names, &location, |s| {
        format!("{base}/Publishers/{publisher}/ArtifactTypes/VMImage/Offers/{offer}/Skus/{s}")
    });
    Ok(json_response(StatusCode::OK, Value::Array(body), None))
}

type SkuPath = Path<(String, String, String, String, String)>;

async fn versions(
    AxState(em): AxState<Emulator>,
    Path((sub, location, publisher, offer, sku)): SkuPath,
    ctx: Ctx,
) -> Result<Response, ArmError> {
    let top = match ctx.query.get("$top") {
        None => None,
        Some(text) => Some(
            text.parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    ArmError::invalid(
                        "$top",
                        format!("The value '{text}' of $top is not a positive integer."),
                    )
                })?,
        ),
    };
    let descending = match ctx
        .query
        .get("$orderby")
        .map(|o| o.trim().to_ascii_lowercase())
    {
        None => false,
        Some(order) => match order.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["name"] | ["name", "asc"] => false,
            ["name", "desc"] => true,
            _ => {
                return Err(ArmError::invalid(
                    "$orderby",
                    format!(
                        "The $orderby '{order}' is not supported: use 'name', 'name asc' or 'name desc'."
                    ),
                ));
            }
        },
    };
    let expand = match ctx.query.get("$expand") {
        None => false,
        Some(e) if e.eq_ignore_ascii_case("properties") => true,
        Some(other) => {
            return Err(ArmError::invalid(
                "$expand",
                format!("The $expand '{other}' is not supported: use 'properties'."),
            ));
        }
    };
    let mut found: Vec<MarketplaceImage> = em.read(|core| {
        core.state
            .images
            .versions(&location, &publisher, &offer, &sku)
            .into_iter()
            .cloned()
            .collect()
    });
    if found.is_empty() {
        return Err(not_found());
    }
    if descending {
        found.reverse();
    }
    if let Some(top) = top {
        found.truncate(top);
    }
    let body: Vec<Value> = found
        .iter()
        .map(|image| {
            let full = image_body(&sub, &location, image);
            if expand {
                full
            } else {
                json!({"name": full["name"], "location": full["location"], "id": full["id"]})
            }
        })
        .collect();
    Ok(json_response(StatusCode::OK, Value::Array(body), None))
}

async fn version(
    AxState(em): AxState<Emulator>,
    Path((sub, location, publisher, offer, sku, version)): Path<(
        String,
        String,
        String,
        String,
        String,
        String,
    )>,
    _ctx: Ctx,
) -> Result<Response, ArmError> {
    let image = em
        .read(|core| {
            core.state
                .images
                .find(&location, &publisher, &offer, &sku, &version)
                .cloned()
        })
        .ok_or_else(not_found)?;
    let body = image_body(&sub, &location, &image);
    Ok(json_response(StatusCode::OK, body, None))
}

/// The `VirtualMachineImage` of `image` as `GET …/versions/{version}` answers it (and the
/// versions list with `$expand=Properties`).
fn image_body(sub: &str, location: &str, image: &MarketplaceImage) -> Value {
    let id = format!(
        "{}/Publishers/{}/ArtifactTypes/VMImage/Offers/{}/Skus/{}/Versions/{}",
        location_id(sub, location),
        image.publisher,
        image.offer,
        image.sku,
        image.version
    );
    json!({
        "id": id,
        "name": image.version,
        "location": location,
        "properties": {
            "hyperVGeneration": image.hyper_v_generation,
            "architecture": image.architecture,
            "osDiskImage": {"operatingSystem": image.os_type},
            "dataDiskImages": [],
            "automaticOSUpgradeProperties": {"automaticOSUpgradeSupported": false},
            "disallowed": {"vmDiskType": "Unmanaged"},
            "imageDeprecationStatus": {"imageState": "Active"},
        },
    })
}

async fn catalog(AxState(em): AxState<Emulator>) -> Response {
    let images = em.read(|core| core.state.images.images.clone());
    axum::Json(json!({ "images": images })).into_response()
}

/// The optional body of `PUT /sandbox/images/...`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Publication {
    location: Option<String>,
    os_type: Option<String>,
    hyper_v_generation: Option<String>,
    architecture: Option<String>,
}

async fn publish(
    AxState(em): AxState<Emulator>,
    Path((publisher, offer, sku, version)): Path<(String, String, String, String)>,
    raw: Bytes,
) -> Result<Response, ArmError> {
    let publication: Publication = if raw.iter().all(u8::is_ascii_whitespace) {
        Publication::default()
    } else {
        serde_json::from_slice(&raw).map_err(|e| ArmError::InvalidRequestContent(e.to_string()))?
    };
    if !is_version(&version) {
        return Err(ArmError::invalid(
            "version",
            format!("version '{version}' is not dotted numbers (e.g. 24.04.202411030)"),
        ));
    }
    let image = MarketplaceImage {
        publisher,
        offer,
        sku,
        version,
        location: publication.location.filter(|l| !l.trim().is_empty()),
        os_type: publication.os_type.unwrap_or_else(|| "Linux".into()),
        hyper_v_generation: publication
            .hyper_v_generation
            .unwrap_or_else(|| "V2".into()),
        architecture: publication.architecture.unwrap_or_else(|| "x64".into()),
    };
    if let Some(problem) = check_properties(
        &image.os_type,
        &image.hyper_v_generation,
        &image.architecture,
    ) {
        let field = match problem.split_whitespace().next() {
            Some("os_type") => "osType",
            Some("hyper_v_generation") => "hyperVGeneration",
            _ => "architecture",
        };
        return Err(ArmError::invalid(field, problem));
    }
    let published = image.clone();
    let new = em.write(|core, _| Ok(core.state.images.publish(image)))?;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(published)).into_response())
}

async fn withdraw(
    AxState(em): AxState<Emulator>,
    Path((publisher, offer, sku, version)): Path<(String, String, String, String)>,
) -> Result<StatusCode, ArmError> {
    let path = format!("/sandbox/images/{publisher}/{offer}/{sku}/{version}");
    let removed = em.write(|core, _| {
        Ok(core
            .state
            .images
            .withdraw(&publisher, &offer, &sku, &version))
    })?;
    if removed {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ArmError::ResourceNotFound(path))
    }
}
