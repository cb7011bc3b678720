//! The Key Vault client against scripted Key Vault answers (wiremock): the request it sends,
//! what each refusal means (retryable or not, the fix named), the size rule, and that neither
//! the token nor the value goes anywhere else.
//!
//! The tests sit in a `#[cfg(test)]` module so the tidy test sees them as test code.

#[cfg(test)]
mod scripted_key_vault {
    use std::time::Duration;

    use nodewright_activities::azure::{Credential, KeyVaultClient, KeyVaultError};
    use nodewright_model::keyvault::SecretUri;
    use serde_json::json;
    use wiremock::matchers::{header, method, path, query_param};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// A value as a bootstrap would hold it; it must never appear in an error.
    const MARKER: &str = "abcdef.0123456789abcdef";
    const VERSION: &str = "4387e9f3d6e14c459867679a90fd0f79";

    fn client(server: &MockServer) -> KeyVaultClient {
        let endpoint = format!("{}/keyvault", server.uri()).parse().expect("a URL");
        KeyVaultClient::new(&Credential::fixed("vault-token"), Some(endpoint)).expect("client")
    }

    fn uri(text: &str) -> SecretUri {
        SecretUri::parse(text).expect("a valid secret URI")
    }

    fn latest() -> SecretUri {
        uri("https://kv1.vault.azure.net/secrets/workers-bootstrap")
    }

    fn refusal(status: u16, code: &str, inner: Option<&str>, message: &str) -> ResponseTemplate {
        let mut error = json!({ "code": code, "message": message });
        if let Some(inner) = inner {
            error["innererror"] = json!({ "code": inner });
        }
        ResponseTemplate::new(status).set_body_json(json!({ "error": error }))
    }

    async fn answered(
        answer: ResponseTemplate,
        secret: &SecretUri,
    ) -> Result<String, KeyVaultError> {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(answer)
            .mount(&server)
            .await;
        client(&server).secret_value(secret).await
    }

    #[tokio::test]
    async fn reads_the_latest_or_the_pinned_version_with_the_token_and_api_version() {
        let server = MockServer::start().await;
        let text = format!("kubeadm join --token {MARKER}");
        Mock::given(method("GET"))
            .and(path("/keyvault/kv1/secrets/workers-bootstrap"))
            .and(query_param("api-version", "2025-07-01"))
            .and(header("authorization", "Bearer vault-token"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "value": text,
                "id": format!("https://kv1.vault.azure.net/secrets/workers-bootstrap/{VERSION}"),
                "attributes": { "enabled": true },
            })))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(format!(
                "/keyvault/kv1/secrets/workers-bootstrap/{VERSION}"
            )))
            .and(query_param("api-version", "2025-07-01"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "value": "pinned" })))
            .mount(&server)
            .await;
        let client = client(&server);
        assert_eq!(client.secret_value(&latest()).await.expect("read"), text);
        let pinned = uri(&format!(
            "https://kv1.vault.azure.net/secrets/workers-bootstrap/{VERSION}"
        ));
        assert_eq!(client.secret_value(&pinned).await.expect("read"), "pinned");
        assert!(!format!("{client:?}").contains("vault-token"));
    }

    #[tokio::test]
    async fn without_an_endpoint_the_request_goes_to_the_vault_the_uri_names() {
        let client =
            KeyVaultClient::new(&Credential::fixed("t"), None).expect("client without endpoint");
        let cases = [
            (
                "https://kv1.vault.azure.net/secrets/boot",
                "https://kv1.vault.azure.net/secrets/boot?api-version=2025-07-01",
            ),
            (
                &*format!("https://gov-kv.vault.usgovcloudapi.net/secrets/boot/{VERSION}"),
                &*format!(
                    "https://gov-kv.vault.usgovcloudapi.net/secrets/boot/{VERSION}?api-version=2025-07-01"
                ),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(
                client.secret_url(&uri(text)).expect("a URL").as_str(),
                expected
            );
        }
    }

    #[tokio::test]
    async fn the_token_goes_nowhere_but_the_vault() {
        let server = MockServer::start().await;
        let elsewhere = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(
                ResponseTemplate::new(302)
                    .insert_header("location", format!("{}/steal", elsewhere.uri())),
            )
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "value": "x" })))
            .mount(&elsewhere)
            .await;
        let client = client(&server);
        let redirected = client.secret_value(&latest()).await;
        assert!(
            matches!(redirected, Err(KeyVaultError::Rejected { status: 302, .. })),
            "a redirect is not followed: {redirected:?}"
        );
        // A URI whose parts were altered after parsing cannot leave the vault's host or path.
        let mut forged = latest();
        forged.vault = "evil.example/x#".to_owned();
        let refused = client.secret_value(&forged).await;
        assert!(
            matches!(refused, Err(KeyVaultError::InvalidUri { .. })),
            "{refused:?}"
        );
        let unrouted = KeyVaultClient::new(&Credential::fixed("t"), None).expect("client");
        assert!(matches!(
            unrouted.secret_url(&forged),
            Err(KeyVaultError::InvalidUri { .. })
        ));
        assert_eq!(
            elsewhere
                .received_requests()
                .await
                .unwrap_or_default()
                .len(),
            0,
            "the token went elsewhere"
        );
    }

    #[tokio::test]
    async fn each_refusal_is_classified_and_names_its_fix() {
        let pinned = uri(&format!(
            "https://kv1.vault.azure.net/secrets/workers-bootstrap/{VERSION}"
        ));
        let cases: Vec<(ResponseTemplate, SecretUri, bool, Option<u64>, &str)> = vec![
            (
                refusal(404, "SecretNotFound", None, "A secret with (name/id) workers-bootstrap was not found in this key vault."),
                latest(),
                false,
                None,
                "the bootstrap Key Vault secret https://kv1.vault.azure.net/secrets/workers-bootstrap does not exist: create it (az keyvault secret set --vault-name kv1 --name workers-bootstrap --file <file>) or correct spec.template.bootstrapKeyVaultSecret.secretUri",
            ),
            (
                refusal(404, "SecretNotFound", None, ""),
                pinned.clone(),
                false,
                None,
                "does not exist (or has no such version)",
            ),
            (
                refusal(403, "Forbidden", Some("ForbiddenByRbac"), "Caller is not authorized to perform action on resource."),
                latest(),
                false,
                None,
                "the worker's Azure identity may not read the bootstrap Key Vault secret https://kv1.vault.azure.net/secrets/workers-bootstrap (403 ForbiddenByRbac): assign the worker's identity the role Key Vault Secrets User with the scope of the vault kv1",
            ),
            (
                refusal(403, "Forbidden", Some("AccessDenied"), "Access denied."),
                latest(),
                false,
                None,
                "the vault uses access policies: switch it to the Azure RBAC permission model",
            ),
            (
                refusal(403, "Forbidden", Some("ForbiddenByFirewall"), "Client address is not authorized."),
                latest(),
                false,
                None,
                "the vault's firewall refuses the worker's address",
            ),
            (
                refusal(403, "Forbidden", None, "Operation get is not allowed on a disabled secret."),
                latest(),
                false,
                None,
                "the secret is disabled: enable it",
            ),
            (
                ResponseTemplate::new(401).insert_header(
                    "www-authenticate",
                    "Bearer authorization=\"https://login.microsoftonline.com/t\", resource=\"https://vault.azure.net\"",
                ),
                latest(),
                false,
                None,
                "Key Vault did not accept the worker's Azure identity for the bootstrap secret https://kv1.vault.azure.net/secrets/workers-bootstrap (401)",
            ),
            (
                refusal(429, "Throttled", None, "Too many requests.").insert_header("retry-after", "7"),
                latest(),
                true,
                Some(7),
                "reading the bootstrap Key Vault secret https://kv1.vault.azure.net/secrets/workers-bootstrap failed: 429 Throttled: Too many requests.",
            ),
            (
                refusal(503, "ServiceUnavailable", None, ""),
                latest(),
                true,
                None,
                "failed: 503 ServiceUnavailable",
            ),
            (
                refusal(400, "BadParameter", None, "The api-version is invalid."),
                latest(),
                false,
                None,
                "Key Vault refused reading the bootstrap secret https://kv1.vault.azure.net/secrets/workers-bootstrap: 400 BadParameter: The api-version is invalid.",
            ),
            (
                ResponseTemplate::new(200).set_body_json(json!({ "value": format!("{MARKER}{}", "x".repeat(70_000)) })),
                latest(),
                false,
                None,
                "is 70023 bytes, more than Azure's customData holds (65,535)",
            ),
            (
                ResponseTemplate::new(200).set_body_json(json!({ "value": [MARKER] })),
                latest(),
                false,
                None,
                "was answered with a body that is not a Key Vault SecretBundle",
            ),
            (
                ResponseTemplate::new(200).set_body_json(json!({ "id": "x" })),
                latest(),
                false,
                None,
                "was answered without a value",
            ),
        ];
        for (answer, secret, retryable, retry_after, expected) in cases {
            let error = answered(answer, &secret).await.expect_err("refused");
            let message = nodewright_model::text::error_chain(&error);
            assert!(message.contains(expected), "{message}\nlacks {expected}");
            assert!(!message.contains(MARKER), "{message}");
            assert!(!format!("{error:?}").contains(MARKER));
            assert_eq!(error.is_retryable(), retryable, "{message}");
            assert_eq!(
                error.retry_after(),
                retry_after.map(Duration::from_secs),
                "{message}"
            );
        }
    }

    #[tokio::test]
    async fn a_vault_that_does_not_answer_is_retried() {
        let client = KeyVaultClient::new(
            &Credential::fixed("t"),
            Some("http://127.0.0.1:1/keyvault".parse().expect("a URL")),
        )
        .expect("client");
        let error = client.secret_value(&latest()).await.expect_err("no vault");
        assert!(error.is_retryable(), "{error}");
    }
}
