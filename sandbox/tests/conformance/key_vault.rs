//! The Key Vault secrets data plane under `/keyvault/{vault}`, as Key Vault answers (secrets.md
//! §5): SetSecret makes versions, GetSecret reads the latest or one, the 401 challenge, 404
//! `SecretNotFound`, 403 for a disabled secret, the api-version, and persistence.

use nodewright_sandbox::arm::EmulatorConfig;
use reqwest::Method;
use serde_json::json;

use crate::persistence::state_file;
use crate::support::*;

const API: &str = "api-version=2025-07-01";

fn secret(vault: &str, name: &str) -> String {
    format!("/keyvault/{vault}/secrets/{name}?{API}")
}

#[tokio::test]
async fn set_secret_makes_versions_and_get_reads_the_latest_or_one() -> TestResult {
    let sb = Sandbox::start().await?;
    let first = sb
        .put(
            &secret("kv1", "boot"),
            &json!({"value": "one", "contentType": "text/x-shellscript", "tags": {"team": "p"}}),
        )
        .await?;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.body["value"], "one");
    assert_eq!(first.body["contentType"], "text/x-shellscript");
    assert_eq!(first.body["tags"]["team"], "p");
    assert_eq!(first.body["attributes"]["enabled"], true);
    assert_eq!(
        first.body["attributes"]["recoveryLevel"],
        "Recoverable+Purgeable"
    );
    assert!(first.body["attributes"]["created"].is_i64());
    let id = first.body["id"].as_str().ok_or("no id")?.to_owned();
    let version = id
        .strip_prefix("https://kv1.vault.azure.net/secrets/boot/")
        .ok_or(format!("id {id} is not the vault's versioned URI"))?
        .to_owned();
    assert_eq!(version.len(), 32);
    assert!(version.bytes().all(|b| b.is_ascii_hexdigit()), "{version}");

    let second = sb
        .put(&secret("kv1", "boot"), &json!({"value": "two"}))
        .await?;
    assert_eq!(second.status, 200);
    assert_ne!(second.body["id"], first.body["id"]);

    let latest = sb.get(&secret("kv1", "boot")).await?;
    assert_eq!(latest.status, 200);
    assert_eq!(latest.body["value"], "two");
    assert_eq!(latest.body["id"], second.body["id"]);
    let pinned = sb
        .get(&format!("/keyvault/kv1/secrets/boot/{version}?{API}"))
        .await?;
    assert_eq!(pinned.status, 200);
    assert_eq!(pinned.body["value"], "one");
    // Names compare case-insensitively, as in Key Vault.
    let shouted = sb.get(&secret("KV1", "BOOT")).await?;
    assert_eq!(shouted.body["value"], "two");
    let stats = sb.get("/sandbox/stats").await?;
    assert_eq!(stats.body["by_operation"]["keyvault.secret.set"]["200"], 2);
    assert_eq!(stats.body["by_operation"]["keyvault.secret.get"]["200"], 3);
    Ok(())
}

#[tokio::test]
async fn refusals_are_key_vaults() -> TestResult {
    let sb = Sandbox::start().await?;
    sb.put(&secret("kv1", "boot"), &json!({"value": "v"}))
        .await?;
    let missing = sb.get(&secret("kv1", "absent")).await?;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.code(), "SecretNotFound");
    let other_vault = sb.get(&secret("kv2", "boot")).await?;
    assert_eq!(other_vault.code(), "SecretNotFound");
    let no_version = sb
        .get(&format!(
            "/keyvault/kv1/secrets/boot/0123456789abcdef0123456789abcdef?{API}"
        ))
        .await?;
    assert_eq!(no_version.status, 404);
    assert_eq!(no_version.code(), "SecretNotFound");

    let unversioned_api = sb.get("/keyvault/kv1/secrets/boot").await?;
    assert_eq!(unversioned_api.status, 400);
    assert_eq!(unversioned_api.code(), "BadParameter");
    let bad_name = sb
        .put(&secret("kv1", "a_b"), &json!({"value": "v"}))
        .await?;
    assert_eq!(bad_name.status, 400);
    let no_value = sb
        .put(&secret("kv1", "c"), &json!({"contentType": "x"}))
        .await?;
    assert_eq!(no_value.status, 400);

    let disabled = sb
        .put(
            &secret("kv1", "off"),
            &json!({"value": "v", "attributes": {"enabled": false}}),
        )
        .await?;
    assert_eq!(disabled.status, 200);
    assert_eq!(disabled.body["attributes"]["enabled"], false);
    let refused = sb.get(&secret("kv1", "off")).await?;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.code(), "Forbidden");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("disabled"))
    );
    Ok(())
}

#[tokio::test]
async fn without_the_token_the_answer_is_a_401_challenge() -> TestResult {
    let sb = Sandbox::start_with(EmulatorConfig {
        token: Some("sandbox-token".to_owned()),
        ..instant()
    })
    .await?;
    let set = sb
        .put(&secret("kv1", "boot"), &json!({"value": "v"}))
        .await?;
    assert_eq!(set.status, 200, "with the token");
    let client = reqwest::Client::new();
    for token in [None, Some("wrong-token")] {
        let mut request =
            client.request(Method::GET, format!("{}{}", sb.base, secret("kv1", "boot")));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await?;
        assert_eq!(response.status().as_u16(), 401, "{token:?}");
        let challenge = response
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(
            challenge.starts_with("Bearer authorization=\"https://login.microsoftonline.com/")
                && challenge.ends_with("resource=\"https://vault.azure.net\""),
            "{challenge}"
        );
        let body: serde_json::Value = response.json().await?;
        assert!(body["error"]["code"].is_string(), "{body}");
        assert!(body.get("value").is_none());
    }
    Ok(())
}

#[tokio::test]
async fn secrets_survive_a_restart_through_the_state_file() -> TestResult {
    let file = state_file()?;
    let config = EmulatorConfig {
        state_file: Some(file.clone()),
        ..instant()
    };
    let id = {
        let sb = Sandbox::start_with(config.clone()).await?;
        let set = sb
            .put(&secret("kv1", "boot"), &json!({"value": "kept"}))
            .await?;
        set.body["id"].clone()
    };
    let again = Sandbox::start_with(config).await?;
    let read = again.get(&secret("kv1", "boot")).await?;
    assert_eq!(read.status, 200);
    assert_eq!(read.body["value"], "kept");
    assert_eq!(read.body["id"], id);
    let _ = std::fs::remove_file(&file);
    Ok(())
}
