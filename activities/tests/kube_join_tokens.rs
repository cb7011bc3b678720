//! A machine's minted join token against the real API server of the local stack: the first
//! fill creates `kube-system/bootstrap-token-<id>` and puts `<id>.<secret>` where the bootstrap
//! says `<<BOOTSTRAP_TOKEN>>`; a second fill (a retried step) reuses that token; one whose
//! expiration has passed is refreshed with the same secret; a Secret of that name with another
//! machine's labels is refused and left as it was; the delete leaves another machine's Secret
//! alone, deletes the machine's, and then finds nothing.
//!
//! The same runs again with a client whose only rights are those of `deploy/join-tokens.yaml`
//! (its Role and RoleBinding, renamed for the run, bound to a ServiceAccount of its own): the Role
//! as shipped is enough for minting, reusing, refreshing and deleting.
//!
//! Run with `cargo test -p nodewright-activities --test kube_join_tokens` after `dev/stack up`.
//! The kubeconfig comes from `KUBECONFIG`, or else from the stack's env file (`.run/env`);
//! without either the tests fail, saying the stack is needed. The tests sit in a
//! `#[cfg(test)]` module so the tidy test sees them as test code.

#[cfg(test)]
mod stack;

#[cfg(test)]
mod kube_join_tokens {
    use std::path::PathBuf;

    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::Api;
    use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
    use kube::config::AuthInfo;
    use nodewright_activities::kube::{
        DeleteBootstrapToken, JoinTokens, TokenDeleted, client_from_config,
    };
    use nodewright_model::ClusterName;
    use nodewright_model::bootstrap_token::machine_secret_name;
    use nodewright_model::pool::MachineTemplate;
    use serde_json::json;

    use super::stack::{client, config};

    type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

    #[tokio::test]
    async fn a_machines_token_is_minted_reused_refreshed_and_deleted_and_no_other_is_touched()
    -> TestResult {
        let client = client().await?;
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let cluster = ClusterName::parse("cluster", &format!("kjt{}", &suffix[..8]))?;
        let machine = format!("workers-{}", &suffix[8..13]);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
        let name = machine_secret_name(&cluster, &machine);
        let result = scenario(&client, &secrets, &cluster, &machine, &name).await;
        let _ = secrets.delete(&name, &DeleteParams::default()).await;
        result
    }

    #[tokio::test]
    async fn the_role_of_deploy_join_tokens_is_enough() -> TestResult {
        let admin = client().await?;
        let config = config().await?;
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let account = format!("kjt-{}", &suffix[..8]);
        let grant = Grant::apply(&admin, &account).await;
        let result = match &grant {
            Ok(token) => {
                let mut limited = config.clone();
                limited.auth_info = AuthInfo {
                    token: Some(token.clone().into()),
                    ..AuthInfo::default()
                };
                let limited = client_from_config(limited)?;
                let cluster = ClusterName::parse("cluster", &format!("kjr{}", &suffix[..8]))?;
                let machine = format!("workers-{}", &suffix[8..13]);
                let secrets: Api<Secret> = Api::namespaced(admin.clone(), "kube-system");
                let name = machine_secret_name(&cluster, &machine);
                let result = scenario(&limited, &secrets, &cluster, &machine, &name).await;
                let _ = secrets.delete(&name, &DeleteParams::default()).await;
                result
            }
            Err(error) => Err(error.to_string().into()),
        };
        Grant::revoke(&admin, &account).await;
        result
    }

    /// `deploy/join-tokens.yaml`, its Role and RoleBinding renamed `<account>` and bound to the
    /// ServiceAccount `nodewright/<account>`.
    struct Grant;

    impl Grant {
        /// Applies the grant; returns a token of the account.
        async fn apply(admin: &kube::Client, account: &str) -> TestResult<String> {
            let text = std::fs::read_to_string(
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/join-tokens.yaml"),
            )?;
            let mut documents = text.split("\n---\n");
            let mut role: Role = serde_saphyr::from_str(documents.next().ok_or("no Role")?)?;
            let mut binding: RoleBinding =
                serde_saphyr::from_str(documents.next().ok_or("no RoleBinding")?)?;
            role.metadata.name = Some(account.to_owned());
            binding.metadata.name = Some(account.to_owned());
            binding.role_ref.name = account.to_owned();
            for subject in binding.subjects.iter_mut().flatten() {
                subject.name = account.to_owned();
            }
            let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "nodewright");
            let service_account: ServiceAccount =
                serde_json::from_value(json!({ "metadata": { "name": account } }))?;
            accounts
                .create(&PostParams::default(), &service_account)
                .await?;
            Api::<Role>::namespaced(admin.clone(), "kube-system")
                .create(&PostParams::default(), &role)
                .await?;
            Api::<RoleBinding>::namespaced(admin.clone(), "kube-system")
                .create(&PostParams::default(), &binding)
                .await?;
            let request: TokenRequest = serde_json::from_value(json!({
                "spec": { "audiences": [], "expirationSeconds": 3600 }
            }))?;
            let issued = accounts
                .create_token_request(account, &PostParams::default(), &request)
                .await?;
            Ok(issued
                .status
                .and_then(|status| status.token)
                .ok_or("no token issued")?)
        }

        async fn revoke(admin: &kube::Client, account: &str) {
            let params = DeleteParams::default();
            let _ = Api::<RoleBinding>::namespaced(admin.clone(), "kube-system")
                .delete(account, &params)
                .await;
            let _ = Api::<Role>::namespaced(admin.clone(), "kube-system")
                .delete(account, &params)
                .await;
            let _ = Api::<ServiceAccount>::namespaced(admin.clone(), "nodewright")
                .delete(account, &params)
                .await;
        }
    }

    async fn scenario(
        client: &kube::Client,
        secrets: &Api<Secret>,
        cluster: &ClusterName,
        machine: &str,
        name: &str,
    ) -> TestResult {
        let tokens = JoinTokens::kubernetes(client.clone());
        let template: MachineTemplate = serde_json::from_value(json!({
            "vmSize": "Standard_D2s_v5",
            "image": { "id": "/CommunityGalleries/g/Images/i/Versions/1" },
            "subnetId": "/s",
            "bootstrapToken": { "ttl": "30m", "extraGroups": ["system:bootstrappers:kjt"] },
        }))?;
        let text = "kubeadm join 10.0.0.4:6443 --token <<BOOTSTRAP_TOKEN>>".to_owned();
        let fill = || async {
            tokens
                .fill(&template, cluster, machine, Some(text.clone()), "inline")
                .await
                .map_err(|e| e.to_string())
        };

        let first = fill().await?.ok_or("no text")?;
        let token = first
            .strip_prefix("kubeadm join 10.0.0.4:6443 --token ")
            .ok_or("the placeholder was not replaced")?
            .to_owned();
        let id = name.strip_prefix("bootstrap-token-").ok_or("name")?;
        assert!(token.starts_with(&format!("{id}.")), "{token}");
        let stored = secrets.get(name).await?;
        assert_eq!(
            stored.type_.as_deref(),
            Some("bootstrap.kubernetes.io/token")
        );
        assert_eq!(
            value(&stored, "token-secret").as_deref(),
            token.split_once('.').map(|(_, secret)| secret)
        );
        assert_eq!(
            value(&stored, "auth-extra-groups").as_deref(),
            Some("system:bootstrappers:kjt")
        );
        let first_uid = stored.metadata.uid.clone();

        assert_eq!(
            fill().await?,
            Some(first.clone()),
            "a retry reuses the token"
        );
        assert_eq!(secrets.get(name).await?.metadata.uid, first_uid);

        let patch = json!({ "stringData": { "expiration": "2020-01-01T00:00:00Z" } });
        secrets
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        assert_eq!(
            fill().await?,
            Some(first.clone()),
            "an expired token is refreshed"
        );
        let expiration = value(&secrets.get(name).await?, "expiration").unwrap_or_default();
        assert!(
            expiration.as_str() > "2026-01-01",
            "the expiration was not moved: {expiration}"
        );

        let foreign =
            json!({ "metadata": { "labels": { "nodewright.io/machine": "someone-else" } } });
        secrets
            .patch(name, &PatchParams::default(), &Patch::Merge(&foreign))
            .await?;
        let refused = fill()
            .await
            .expect_err("another machine's token is refused");
        assert!(
            refused.contains(name) && !refused.contains(&token),
            "{refused}"
        );
        let input = DeleteBootstrapToken {
            cluster: cluster.clone(),
            machine: machine.to_owned(),
        };
        let delete = || async { tokens.delete(&input).await.map_err(|e| e.to_string()) };
        assert_eq!(delete().await?, TokenDeleted::NotOurs);
        assert!(
            secrets.get_opt(name).await?.is_some(),
            "another's token stays"
        );

        let ours = json!({ "metadata": { "labels": { "nodewright.io/machine": machine } } });
        secrets
            .patch(name, &PatchParams::default(), &Patch::Merge(&ours))
            .await?;
        assert_eq!(delete().await?, TokenDeleted::Deleted);
        assert!(secrets.get_opt(name).await?.is_none());
        assert_eq!(delete().await?, TokenDeleted::Absent);
        Ok(())
    }

    fn value(secret: &Secret, key: &str) -> Option<String> {
        secret
            .data
            .as_ref()?
            .get(key)
            .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
    }
}
