//! Azure Compute Galleries: gallery, image definition and image version through their async
//! operations, Azure's refusals (a parent that does not exist, a parent with children, a bad
//! version name, a missing field), and a VM created from the definition or `latest` getting the
//! newest version not excluded from latest.

use serde_json::{Value, json};

use super::support::*;

const GALLERY_API: &str = "2026-03-03";

fn gallery_id(name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/galleries/{name}")
}

fn at(id: &str) -> String {
    format!("{id}?api-version={GALLERY_API}")
}

fn definition_body() -> Value {
    json!({"location": "westeurope", "properties": {"osType": "Linux", "osState": "Generalized",
        "hyperVGeneration": "V2",
        "identifier": {"publisher": "contoso", "offer": "nodes", "sku": "ubuntu"}}})
}

fn version_body(profile: Value) -> Value {
    json!({"location": "westeurope", "properties": {"publishingProfile": profile,
        "storageProfile": {"source": {"virtualMachineId": vm_id("builder")}}}})
}

/// Creates `id` with `body` and waits for its operation; answers the final GET.
async fn create(sb: &Sandbox, id: &str, body: &Value) -> Res<Resp> {
    let created = sb.put(&at(id), body).await?;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(created.state(), "Creating");
    assert_eq!(sb.finish(&created).await?["status"], "Succeeded");
    let got = sb.get(&at(id)).await?;
    assert_eq!(got.state(), "Succeeded", "{got:?}");
    Ok(got)
}

/// A gallery `g` with definition `node` and versions 1.0.0, 1.0.5 (past its end of life),
/// 1.1.0 (excluded from latest), 2.0.0 (only in East US).
async fn gallery_with_versions(sb: &Sandbox) -> Res<String> {
    let gallery = create(
        sb,
        &gallery_id("g"),
        &json!({"location": "westeurope", "properties": {"description": "nodes"}}),
    )
    .await?;
    assert_eq!(
        gallery.body["properties"]["identifier"]["uniqueName"],
        format!("{SUB}-G")
    );
    let definition = format!("{}/images/node", gallery_id("g"));
    create(sb, &definition, &definition_body()).await?;
    for (name, profile) in [
        ("1.0.0", json!({})),
        ("1.0.5", json!({"endOfLifeDate": "2001-01-01T00:00:00Z"})),
        ("1.1.0", json!({"excludeFromLatest": true})),
        ("2.0.0", json!({"targetRegions": [{"name": "East US"}]})),
    ] {
        create(
            sb,
            &format!("{definition}/versions/{name}"),
            &version_body(profile),
        )
        .await?;
    }
    Ok(definition)
}

fn exact_version(vm: &Resp) -> &Value {
    &vm.body["properties"]["storageProfile"]["imageReference"]["exactVersion"]
}

#[tokio::test]
async fn galleries_definitions_and_versions_are_made_read_and_listed() -> TestResult {
    let sb = Sandbox::start().await?;
    let definition = gallery_with_versions(&sb).await?;
    let version = sb.get(&at(&format!("{definition}/versions/1.0.0"))).await?;
    assert_eq!(
        version.body["type"],
        "Microsoft.Compute/galleries/images/versions"
    );
    let profile = &version.body["properties"]["publishingProfile"];
    assert_eq!(profile["excludeFromLatest"], false);
    assert_eq!(profile["targetRegions"][0]["name"], "westeurope");
    assert!(profile["publishedDate"].is_string(), "{profile}");
    let expanded = sb
        .get(&format!(
            "{}&$expand=ReplicationStatus",
            at(&format!("{definition}/versions/1.0.0"))
        ))
        .await?;
    assert_eq!(
        expanded.body["properties"]["replicationStatus"]["aggregatedState"],
        "Completed"
    );
    let versions = sb.get(&at(&format!("{definition}/versions"))).await?;
    let names: Vec<&str> = versions.body["value"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(names, ["1.0.0", "1.0.5", "1.1.0", "2.0.0"]);
    let definitions = sb.get(&at(&format!("{}/images", gallery_id("g")))).await?;
    assert_eq!(definitions.body["value"].as_array().map(Vec::len), Some(1));
    let all = sb
        .get(&format!(
            "/subscriptions/{SUB}/providers/Microsoft.Compute/galleries?api-version={GALLERY_API}"
        ))
        .await?;
    assert_eq!(all.body["value"][0]["name"], "g", "{all:?}");
    let stats = sb.get("/sandbox/stats").await?;
    assert_eq!(
        stats.body["by_operation"]["galleryImageVersion.put"]["201"],
        4
    );
    Ok(())
}

#[tokio::test]
async fn azures_refusals_name_the_parent_the_children_and_the_field() -> TestResult {
    let sb = Sandbox::start().await?;
    let orphan = sb
        .put(
            &at(&format!("{}/images/node", gallery_id("none"))),
            &definition_body(),
        )
        .await?;
    assert_eq!(
        (orphan.status, orphan.code()),
        (404, "ParentResourceNotFound"),
        "{orphan:?}"
    );
    let orphan_get = sb
        .get(&at(&format!("{}/images/node", gallery_id("none"))))
        .await?;
    assert_eq!(orphan_get.code(), "ParentResourceNotFound");
    let definition = gallery_with_versions(&sb).await?;

    let mut no_state = definition_body();
    no_state["properties"]["osState"] = Value::Null;
    let refused = sb
        .put(&at(&format!("{}/images/other", gallery_id("g"))), &no_state)
        .await?;
    assert_eq!((refused.status, refused.code()), (400, "InvalidParameter"));
    assert_eq!(
        refused.body["error"]["target"],
        "galleryImage.properties.osState"
    );

    let bad_name = sb
        .put(
            &at(&format!("{definition}/versions/1.0")),
            &version_body(json!({})),
        )
        .await?;
    assert_eq!(bad_name.status, 400);
    assert_eq!(bad_name.body["error"]["target"], "galleryImageVersionName");

    let mut changed = definition_body();
    changed["properties"]["identifier"]["sku"] = json!("other");
    let immutable = sb.put(&at(&definition), &changed).await?;
    assert_eq!(
        (immutable.status, immutable.code()),
        (409, "PropertyChangeNotAllowed")
    );

    let nested = sb.delete(&at(&gallery_id("g"))).await?;
    assert_eq!(
        (nested.status, nested.code()),
        (409, "CannotDeleteResource"),
        "{nested:?}"
    );
    let vm_version = sb
        .put(
            &format!("{}?api-version={VM_API}", gallery_id("g")),
            &json!({"location": "westeurope"}),
        )
        .await?;
    assert_eq!(vm_version.code(), "InvalidApiVersionParameter");

    // Bottom up, each DELETE an operation; then the gallery is gone.
    for name in ["1.0.0", "1.0.5", "1.1.0", "2.0.0"] {
        let deleted = sb
            .delete(&at(&format!("{definition}/versions/{name}")))
            .await?;
        assert_eq!(deleted.status, 202, "{deleted:?}");
        assert!(deleted.header("location").is_some());
        assert_eq!(sb.finish(&deleted).await?["status"], "Succeeded");
    }
    let deleted = sb.delete(&at(&definition)).await?;
    sb.finish(&deleted).await?;
    let deleted = sb.delete(&at(&gallery_id("g"))).await?;
    assert_eq!(deleted.status, 202);
    sb.finish(&deleted).await?;
    assert_eq!(
        sb.get(&at(&gallery_id("g"))).await?.code(),
        "ResourceNotFound"
    );
    assert_eq!(sb.delete(&at(&gallery_id("g"))).await?.status, 204);
    Ok(())
}

#[tokio::test]
async fn a_vm_from_latest_gets_the_newest_version_not_excluded_and_replicated_there() -> TestResult
{
    let sb = Sandbox::start().await?;
    let definition = gallery_with_versions(&sb).await?;
    let from = |id: String| {
        let mut body = vm_body(None, &[]);
        body["properties"]["storageProfile"]["imageReference"] = json!({"id": id});
        body
    };
    sb.create_vm("by-definition", &from(definition.clone()))
        .await?;
    let vm1 = sb.get(&vm("by-definition")).await?;
    // 1.1.0 is excluded, 2.0.0 not in westeurope; 1.0.5's end of life is informational.
    assert_eq!(exact_version(&vm1), "1.0.5", "{vm1:?}");
    sb.create_vm("by-latest", &from(format!("{definition}/versions/latest")))
        .await?;
    assert_eq!(exact_version(&sb.get(&vm("by-latest")).await?), "1.0.5");
    sb.create_vm("pinned", &from(format!("{definition}/versions/1.1.0")))
        .await?;
    assert_eq!(exact_version(&sb.get(&vm("pinned")).await?), "1.1.0");

    let not_there = sb
        .put(
            &vm("pinned-2"),
            &from(format!("{definition}/versions/2.0.0")),
        )
        .await?;
    assert_eq!(
        (not_there.status, not_there.code()),
        (404, "GalleryImageNotFound"),
        "{not_there:?}"
    );
    assert_eq!(not_there.body["error"]["target"], "imageReference");
    assert!(
        not_there.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("is not available in westeurope region")),
        "{not_there:?}"
    );

    // Publishing a newer version (a PATCH lifting the exclusion) moves latest.
    let lifted = sb
        .patch(
            &at(&format!("{definition}/versions/1.1.0")),
            &json!({"properties": {"publishingProfile": {"excludeFromLatest": false, "targetRegions": [{"name": "westeurope"}]}}}),
        )
        .await?;
    assert_eq!(lifted.status, 200, "{lifted:?}");
    sb.finish(&lifted).await?;
    sb.create_vm("after-lift", &from(definition.clone()))
        .await?;
    assert_eq!(exact_version(&sb.get(&vm("after-lift")).await?), "1.1.0");
    Ok(())
}

#[tokio::test]
async fn galleries_and_published_images_survive_a_restart_through_the_state_file() -> TestResult {
    let file = crate::persistence::state_file()?;
    let config = nodewright_sandbox::arm::EmulatorConfig {
        state_file: Some(file.clone()),
        ..instant()
    };
    let definition = {
        let sb = Sandbox::start_with(config.clone()).await?;
        let published = sb
            .send_with(
                reqwest::Method::PUT,
                "/sandbox/images/Contoso/node/v1/3.0.0",
                None,
                &[],
            )
            .await?;
        assert_eq!(published.status, 201);
        gallery_with_versions(&sb).await?
    };
    let again = Sandbox::start_with(config).await?;
    let version = again
        .get(&at(&format!("{definition}/versions/1.0.5")))
        .await?;
    assert_eq!(version.state(), "Succeeded", "{version:?}");
    let mut body = vm_body(None, &[]);
    body["properties"]["storageProfile"]["imageReference"] =
        json!({"publisher": "Contoso", "offer": "node", "sku": "v1", "version": "latest"});
    again.create_vm("after-restart", &body).await?;
    assert_eq!(
        exact_version(&again.get(&vm("after-restart")).await?),
        "3.0.0"
    );
    let _ = std::fs::remove_file(&file);
    Ok(())
}

#[tokio::test]
async fn removing_seeded_resources_by_prefix_leaves_galleries() -> TestResult {
    let sb = Sandbox::start().await?;
    create(
        &sb,
        &gallery_id("gone-gallery"),
        &json!({"location": "westeurope", "properties": {}}),
    )
    .await?;
    let seeded = sb
        .post(
            "/sandbox/seed",
            &json!({"resources": [{"type": "vm", "name": "gone-vm"}]}),
        )
        .await?;
    assert_eq!(seeded.status, 200, "{seeded:?}");
    let removed = sb.delete("/sandbox/seed?prefix=gone-").await?;
    assert_eq!(removed.body, json!({"removed": 1}), "{removed:?}");
    assert_eq!(sb.get(&at(&gallery_id("gone-gallery"))).await?.status, 200);
    Ok(())
}
