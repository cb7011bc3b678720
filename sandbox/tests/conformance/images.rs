//! Marketplace images: the version lists and GETs under
//! `/subscriptions/{sub}/providers/Microsoft.Compute/locations/{l}/publishers/…`, publishing a
//! version while the emulator runs, and a VM created from `latest` getting the newest version as
//! its `exactVersion`; an image the catalog does not hold refused as Azure refuses it.

use nodewright_sandbox::arm::{EmulatorConfig, ImageConfig};
use reqwest::Method;
use serde_json::{Value, json};

use super::support::*;

const NEWEST_SERVER: &str = "24.04.202505150";

fn publisher_path(location: &str) -> String {
    format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/{location}/publishers")
}

fn versions_path(offer: &str, sku: &str) -> String {
    format!(
        "{}/Canonical/artifacttypes/vmimage/offers/{offer}/skus/{sku}/versions",
        publisher_path("westeurope")
    )
}

fn names(body: &Value) -> Vec<&str> {
    body.as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["name"].as_str())
        .collect()
}

#[tokio::test]
async fn image_versions_are_listed_as_a_bare_array_ordered_and_topped() -> TestResult {
    let sb = Sandbox::start().await?;
    let list = sb
        .get(&format!(
            "{}?api-version={VM_API}",
            versions_path("ubuntu-24_04-lts", "server")
        ))
        .await?;
    assert_eq!(list.status, 200, "{list:?}");
    assert_eq!(
        names(&list.body),
        [
            "24.04.1",
            "24.04.2",
            "24.04.3",
            "24.04.202409120",
            "24.04.202501140",
            NEWEST_SERVER
        ]
    );
    let first = &list.body[3];
    assert_eq!(first["location"], "westeurope");
    assert!(
        first["id"].as_str().is_some_and(
            |id| id.ends_with("/Offers/ubuntu-24_04-lts/Skus/server/Versions/24.04.202409120")
        ),
        "{first}"
    );
    // What az vm image show does for `latest`.
    let newest = sb
        .get(&format!(
            "{}?$orderby=name%20desc&$top=1&api-version=2026-04-01",
            versions_path("ubuntu-24_04-lts", "server")
        ))
        .await?;
    assert_eq!(names(&newest.body), [NEWEST_SERVER], "{newest:?}");
    let refused = sb
        .get(&format!(
            "{}?$orderby=published&api-version={VM_API}",
            versions_path("ubuntu-24_04-lts", "server")
        ))
        .await?;
    assert_eq!((refused.status, refused.code()), (400, "InvalidParameter"));
    let unknown = sb
        .get(&format!(
            "{}?api-version={VM_API}",
            versions_path("ubuntu-24_04-lts", "nope")
        ))
        .await?;
    assert_eq!(
        (unknown.status, unknown.code()),
        (404, "NotFound"),
        "{unknown:?}"
    );
    assert_eq!(
        unknown.body["error"]["message"],
        "Artifact: VMImage was not found."
    );

    let publishers = sb
        .get(&format!(
            "{}?api-version={VM_API}",
            publisher_path("westeurope")
        ))
        .await?;
    assert_eq!(names(&publishers.body), ["Canonical"]);
    let offers = sb
        .get(&format!(
            "{}/Canonical/artifacttypes/vmimage/offers?api-version={VM_API}",
            publisher_path("westeurope")
        ))
        .await?;
    assert!(
        names(&offers.body).contains(&"ubuntu-24_04-lts"),
        "{offers:?}"
    );
    let skus = sb
        .get(&format!(
            "{}/Canonical/artifacttypes/vmimage/offers/ubuntu-24_04-lts/skus?api-version={VM_API}",
            publisher_path("westeurope")
        ))
        .await?;
    assert_eq!(names(&skus.body), ["server", "server-arm64", "server-gen1"]);
    Ok(())
}

#[tokio::test]
async fn an_image_version_shows_its_os_generation_and_architecture() -> TestResult {
    let sb = Sandbox::start().await?;
    let arm = sb
        .get(&format!(
            "{}/24.04.202501140?api-version={VM_API}",
            versions_path("ubuntu-24_04-lts", "server-arm64")
        ))
        .await?;
    assert_eq!(arm.status, 200, "{arm:?}");
    assert_eq!(arm.body["name"], "24.04.202501140");
    let p = &arm.body["properties"];
    assert_eq!(p["osDiskImage"]["operatingSystem"], "Linux");
    assert_eq!(p["hyperVGeneration"], "V2");
    assert_eq!(p["architecture"], "Arm64");
    let missing = sb
        .get(&format!(
            "{}/1.2.3?api-version={VM_API}",
            versions_path("ubuntu-24_04-lts", "server")
        ))
        .await?;
    assert_eq!((missing.status, missing.code()), (404, "NotFound"));
    let wrong_version = sb
        .get(&format!(
            "{}?api-version=2026-03-03",
            versions_path("ubuntu-24_04-lts", "server")
        ))
        .await?;
    assert_eq!(wrong_version.code(), "InvalidApiVersionParameter");
    Ok(())
}

#[tokio::test]
async fn a_vm_from_latest_gets_the_newest_version_published_while_running() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.create_vm("from-latest", &vm_body(None, &[])).await?;
    let vm1 = sb.get(&vm("from-latest")).await?;
    let reference = &vm1.body["properties"]["storageProfile"]["imageReference"];
    assert_eq!(reference["version"], "latest");
    assert_eq!(reference["exactVersion"], NEWEST_SERVER, "{reference}");

    let published = sb
        .send_with(
            Method::PUT,
            "/sandbox/images/Canonical/ubuntu-24_04-lts/server/24.04.202611010",
            None,
            &[],
        )
        .await?;
    assert_eq!(published.status, 201, "{published:?}");
    let again = sb
        .send_with(
            Method::PUT,
            "/sandbox/images/Canonical/ubuntu-24_04-lts/server/24.04.202611010",
            Some(&json!({"hyperVGeneration": "V2"})),
            &[],
        )
        .await?;
    assert_eq!(again.status, 200, "republishing replaces: {again:?}");
    sb.create_vm("from-newer", &vm_body(None, &[])).await?;
    let vm2 = sb
        .get(&format!("{}&$expand=instanceView", vm("from-newer")))
        .await?;
    assert_eq!(
        vm2.body["properties"]["storageProfile"]["imageReference"]["exactVersion"],
        "24.04.202611010"
    );
    // An update keeps what the create resolved.
    let mut update = vm_body(None, &[]);
    update["tags"] = json!({"changed": "yes"});
    let updated = sb.put(&vm("from-latest"), &update).await?;
    assert_eq!(updated.status, 200, "{updated:?}");
    sb.finish(&updated).await?;
    let vm1 = sb.get(&vm("from-latest")).await?;
    assert_eq!(
        vm1.body["properties"]["storageProfile"]["imageReference"]["exactVersion"],
        NEWEST_SERVER
    );

    let withdrawn = sb
        .delete("/sandbox/images/Canonical/ubuntu-24_04-lts/server/24.04.202611010")
        .await?;
    assert_eq!(withdrawn.status, 204);
    let listed = sb.get("/sandbox/images").await?;
    assert!(
        !listed.body["images"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|i| i["version"] == "24.04.202611010"),
        "{listed:?}"
    );
    let bad = sb
        .send_with(Method::PUT, "/sandbox/images/p/o/s/latest", None, &[])
        .await?;
    assert_eq!(
        (bad.status, bad.body["error"]["target"].as_str()),
        (400, Some("version"))
    );
    Ok(())
}

#[tokio::test]
async fn a_vm_from_an_image_the_catalog_lacks_is_refused_as_platform_image_not_found() -> TestResult
{
    let sb = Sandbox::start().await?;
    let mut body = vm_body(None, &[]);
    body["properties"]["storageProfile"]["imageReference"] =
        json!({"publisher": "Contoso", "offer": "node", "sku": "v1", "version": "latest"});
    let refused = sb.put(&vm("no-image"), &body).await?;
    assert_eq!(
        (refused.status, refused.code()),
        (404, "PlatformImageNotFound"),
        "{refused:?}"
    );
    assert_eq!(refused.body["error"]["target"], "imageReference");
    assert_eq!(
        refused.body["error"]["message"],
        "The platform image 'Contoso:node:v1:latest' is not available. Verify that all fields in the storage profile are correct. For more details about storage profile information, please refer to https://aka.ms/storageprofile"
    );
    assert_eq!(
        sb.get(&vm("no-image")).await?.status,
        404,
        "nothing was made"
    );

    // The configuration's [[images]] add to the built-in catalog.
    let sb = Sandbox::start_with(EmulatorConfig {
        images: vec![ImageConfig {
            publisher: "Contoso".into(),
            offer: "node".into(),
            sku: "v1".into(),
            versions: vec!["1.0.0".into(), "1.2.0".into()],
            location: Some("westeurope".into()),
            os_type: "Linux".into(),
            hyper_v_generation: "V2".into(),
            architecture: "x64".into(),
        }],
        ..instant()
    })
    .await?;
    sb.create_vm("contoso", &body).await?;
    let made = sb.get(&vm("contoso")).await?;
    assert_eq!(
        made.body["properties"]["storageProfile"]["imageReference"]["exactVersion"],
        "1.2.0"
    );
    let mut elsewhere = body.clone();
    elsewhere["location"] = json!("eastus");
    let refused = sb.put(&vm("contoso-east"), &elsewhere).await?;
    assert_eq!(
        refused.code(),
        "PlatformImageNotFound",
        "offered in westeurope only"
    );
    sb.create_vm("ubuntu", &vm_body(None, &[])).await?;
    Ok(())
}
