//! The bootstrap token check: a VM that joins with a token joins only when the apiserver
//! authenticates it (see the module doc of [`super`], "Bootstrap tokens").

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::config::AuthInfo;
use serde_json::{Value, json};

use super::error::{Error, Result};
use crate::compute::MachineView;

/// The namespace of bootstrap token Secrets.
const TOKEN_NAMESPACE: &str = "kube-system";

/// What the apiserver made of a VM's bootstrap token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenVerdict {
    /// It authenticated as `system:bootstrap:<id>`: the VM joins.
    Authenticated,
    /// No Secret of its id exists: a token the cluster's store does not hold; the VM joins as
    /// before (the sandbox cannot tell a static credential).
    NotInStore,
    /// The apiserver refused it, or it authenticated as someone else: the VM does not join.
    Refused(String),
}

/// Checks tokens against the joiner's apiserver.
pub(super) struct TokenCheck {
    /// The token Secrets (read with the joiner's own credentials).
    secrets: Api<Secret>,
    /// The joiner's configuration: its apiserver and CA, whose credentials are replaced by the
    /// token for each check.
    config: kube::Config,
    /// The last refusal logged per VM id, so each is logged once.
    logged: Mutex<HashMap<String, String>>,
}

impl TokenCheck {
    pub(super) fn new(client: kube::Client, config: kube::Config) -> Self {
        Self {
            secrets: Api::namespaced(client, TOKEN_NAMESPACE),
            config,
            logged: Mutex::default(),
        }
    }

    /// Whether the VM `machine`, registering Node `node` with `token`, may join; logs the first
    /// refusal of each kind (naming the Secret, never the token).
    pub(super) async fn admits(
        &self,
        machine: &MachineView,
        node: &str,
        token: &str,
    ) -> Result<bool> {
        let (id, _) = token.split_once('.').unwrap_or((token, ""));
        let secret = format!("bootstrap-token-{id}");
        let verdict = self.verdict(node, &secret, id, token).await?;
        let admitted = match &verdict {
            TokenVerdict::Authenticated => {
                tracing::info!(%node, vm = %machine.id, %secret, "bootstrap token authenticated as system:bootstrap:{id}");
                true
            }
            TokenVerdict::NotInStore => {
                tracing::debug!(%node, %secret, "no such token Secret: joining without a check");
                true
            }
            TokenVerdict::Refused(reason) => {
                let mut logged = self
                    .logged
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if logged.get(&machine.id) != Some(reason) {
                    tracing::warn!(%node, vm = %machine.id, %secret, %reason, "the VM's bootstrap token does not authenticate: the VM does not join");
                    logged.insert(machine.id.clone(), reason.clone());
                }
                false
            }
        };
        Ok(admitted)
    }

    async fn verdict(
        &self,
        node: &str,
        secret: &str,
        id: &str,
        token: &str,
    ) -> Result<TokenVerdict> {
        let stored =
            self.secrets
                .get_opt(secret)
                .await
                .map_err(|source| Error::ReadTokenSecret {
                    node: node.to_owned(),
                    secret: secret.to_owned(),
                    source,
                })?;
        if stored.is_none() {
            return Ok(TokenVerdict::NotInStore);
        }
        let check_error = |source| Error::CheckToken {
            node: node.to_owned(),
            secret: secret.to_owned(),
            source,
        };
        let mut config = self.config.clone();
        config.auth_info = AuthInfo {
            token: Some(token.to_owned().into()),
            ..AuthInfo::default()
        };
        config.default_retry = false;
        let client = kube::Client::try_from(config).map_err(check_error)?;
        let body = serde_json::to_vec(&json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "SelfSubjectReview",
        }))
        .map_err(|error| check_error(kube::Error::SerdeError(error)))?;
        let request = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|error| check_error(kube::Error::HttpError(error)))?;
        let review = match client.request::<Value>(request).await {
            Ok(review) => review,
            Err(kube::Error::Api(status)) if matches!(status.code, 401 | 403) => {
                return Ok(TokenVerdict::Refused(format!(
                    "the apiserver answered HTTP {} {}",
                    status.code, status.reason
                )));
            }
            Err(source) => return Err(check_error(source)),
        };
        let username = review["status"]["userInfo"]["username"]
            .as_str()
            .unwrap_or_default();
        let expected = format!("system:bootstrap:{id}");
        Ok(if username == expected {
            TokenVerdict::Authenticated
        } else {
            TokenVerdict::Refused(format!(
                "it authenticated as {}, not {expected}",
                if username.is_empty() {
                    "nobody"
                } else {
                    username
                }
            ))
        })
    }
}
