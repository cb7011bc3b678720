//! Table tests: (file, environment) → config or error.

use std::collections::HashMap;
use std::error::Error as _;

use super::*;

/// Environment variables of a test case.
type Env = &'static [(&'static str, &'static str)];

const EXAMPLE: &str = include_str!("../../../nodewright.example.toml");

/// The environment `dev/stack up` writes to `.run/env`.
const LOCAL_STACK_ENV: &[(&str, &str)] = &[
    ("KUBECONFIG", "/work/main/.run/admin.kubeconfig"),
    ("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
    ("TEMPORAL_NAMESPACE", "default"),
    ("NODEWRIGHT_TEMPORAL_UI", "http://127.0.0.1:8233"),
    ("NODEWRIGHT_CLUSTER", "local"),
    ("NODEWRIGHT_RUN_DIR", "/work/main/.run"),
    ("NODEWRIGHT_ARM_ENDPOINT", "http://127.0.0.1:8443"),
    ("NODEWRIGHT_ARM_TOKEN", "sandbox-token"),
    (
        "NODEWRIGHT_KEYVAULT_ENDPOINT",
        "http://127.0.0.1:8443/keyvault",
    ),
    (
        "NODEWRIGHT_AZURE_SUBSCRIPTION_ID",
        "00000000-0000-0000-0000-000000000000",
    ),
    ("NODEWRIGHT_AZURE_RESOURCE_GROUP", "nodewright-local"),
    ("NODEWRIGHT_AZURE_LOCATION", "westeurope"),
];

fn env_of<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    let map: HashMap<&str, &str> = pairs.iter().copied().collect();
    move |name| map.get(name).map(|value| (*value).to_owned())
}

fn load(file: Option<&str>, env: &[(&str, &str)]) -> Result<ClusterConfig> {
    ClusterConfig::load(file, "nodewright.toml", env_of(env))
}

/// The error's message and every cause, as `{:#}` would print them.
fn chain(error: &ConfigError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A minimal valid file: the required keys only.
const MINIMAL: &str = r#"
cluster = "prod-weu"
[azure]
subscription_id = "sub"
resource_group = "rg"
location = "westeurope"
[azure.auth]
mode = "workload-identity"
"#;

#[test]
fn the_local_stack_environment_alone_is_a_complete_config_with_static_auth() {
    let config = load(None, LOCAL_STACK_ENV).unwrap_or_else(|error| panic!("complete: {error}"));
    assert_eq!(config.cluster.as_str(), "local");
    assert_eq!(
        config.azure,
        AzureConfig {
            subscription_id: "00000000-0000-0000-0000-000000000000".to_owned(),
            resource_group: "nodewright-local".to_owned(),
            location: "westeurope".to_owned(),
            arm_endpoint: "http://127.0.0.1:8443".to_owned(),
            key_vault_endpoint: Some("http://127.0.0.1:8443/keyvault".to_owned()),
            token_scope: DEFAULT_TOKEN_SCOPE.to_owned(),
            auth: AzureAuth::Static {
                token: Secret::new("sandbox-token")
            },
            key_vault_token: None,
            arm_writes_per_second: DEFAULT_ARM_WRITES_PER_SECOND,
            sandbox: false,
        }
    );
    assert_eq!(
        config.kubernetes.kubeconfig,
        Some(PathBuf::from("/work/main/.run/admin.kubeconfig"))
    );
    assert_eq!(config.temporal.address, "127.0.0.1:7233");
    assert_eq!(config.temporal.tls, None);
}

#[test]
fn unset_keys_take_their_defaults() {
    let config = load(Some(MINIMAL), &[]).unwrap_or_else(|error| panic!("valid: {error}"));
    assert_eq!(config.azure.arm_endpoint, "https://management.azure.com");
    assert_eq!(
        config.azure.token_scope,
        "https://management.azure.com/.default"
    );
    assert_eq!(config.azure.arm_writes_per_second, 5.0);
    assert_eq!(config.azure.auth, AzureAuth::WorkloadIdentity);
    assert_eq!(config.azure.key_vault_endpoint, None);
    assert_eq!(config.azure.key_vault_token, None);
    assert_eq!(config.kubernetes, KubernetesConfig::default());
    assert_eq!(
        config.temporal,
        TemporalConfig {
            address: "127.0.0.1:7233".to_owned(),
            namespace: "default".to_owned(),
            task_queue: format!("nodewright-{}", config.cluster),
            api_key: None,
            api_key_file: None,
            ui_url: "http://127.0.0.1:8233".to_owned(),
            tls: None,
            encryption_keys: None,
        }
    );
    assert_eq!(
        config.worker,
        WorkerConfig {
            metrics_address: SocketAddr::from(([127, 0, 0, 1], 9464)),
            health_address: SocketAddr::from(([127, 0, 0, 1], 8080)),
            log_format: LogFormat::Text,
            shutdown_grace: Duration::from_secs(20),
        }
    );
}

#[test]
fn the_identity_namespace_must_be_a_namespace_name() {
    let file = format!("{MINIMAL}\n[kubernetes]\nidentity_namespace = \"Node_Wright\"\n");
    let error =
        load(Some(&file), &[]).map_or_else(|error| error, |config| panic!("invalid: {config:?}"));
    let message = chain(&error);
    assert!(
        message.contains("kubernetes.identity_namespace") && message.contains("Node_Wright"),
        "{message}"
    );
    let config = load(Some(MINIMAL), &[("NODEWRIGHT_IDENTITY_NAMESPACE", "ops")])
        .unwrap_or_else(|error| panic!("valid: {error}"));
    assert_eq!(config.kubernetes.identity_namespace, "ops");
}

#[test]
fn a_full_file_sets_every_section() {
    let file = r#"
cluster = "prod-weu"
[azure]
subscription_id = "sub"
resource_group = "rg"
location = "northeurope"
arm_endpoint = "https://management.usgovcloudapi.net"
token_scope = "https://management.usgovcloudapi.net/.default"
arm_writes_per_second = 2.5
[azure.auth]
mode = "client-secret"
tenant_id = "tenant"
client_id = "app"
client_secret = "s3cret"
[kubernetes]
kubeconfig = "/etc/kubeconfig"
context = "admin"
identity_namespace = "platform"
[temporal]
address = "ns.acct.tmprl.cloud:7233"
namespace = "ns.acct"
task_queue = "nw"
ui_url = "https://cloud.temporal.io"
[temporal.tls]
server_ca_cert = "ca.pem"
client_cert = "client.pem"
client_key = "client.key"
server_name = "temporal.internal"
[worker]
metrics_address = "127.0.0.1:9000"
health_address = "127.0.0.1:9001"
log_format = "json"
shutdown_grace = "1m 30s"
"#;
    let config = load(Some(file), &[]).unwrap_or_else(|error| panic!("valid: {error}"));
    assert_eq!(config.azure.location, "northeurope");
    assert_eq!(config.azure.arm_writes_per_second, 2.5);
    assert_eq!(
        config.azure.auth,
        AzureAuth::ClientSecret {
            tenant_id: "tenant".to_owned(),
            client_id: "app".to_owned(),
            client_secret: Secret::new("s3cret"),
        }
    );
    assert_eq!(
        config.kubernetes,
        KubernetesConfig {
            kubeconfig: Some(PathBuf::from("/etc/kubeconfig")),
            context: Some("admin".to_owned()),
            identity_namespace: "platform".to_owned(),
        }
    );
    assert_eq!(
        config.temporal.tls,
        Some(TemporalTls {
            server_ca_cert: Some(PathBuf::from("ca.pem")),
            client_certificate: Some(ClientCertificate {
                cert: PathBuf::from("client.pem"),
                key: PathBuf::from("client.key"),
            }),
            server_name: Some("temporal.internal".to_owned()),
        })
    );
    assert_eq!(config.worker.log_format, LogFormat::Json);
    assert_eq!(config.worker.shutdown_grace, Duration::from_secs(90));
    assert_eq!(config.worker.metrics_address.port(), 9000);
}

#[test]
fn the_environment_wins_over_the_file_and_primaries_over_fallbacks() {
    let file = format!(
        "{MINIMAL}\n[temporal]\naddress = \"file:7233\"\nnamespace = \"file-ns\"\n[temporal.tls]\nenabled = false\n[worker]\nshutdown_grace = \"5s\"\n"
    );
    // (environment, expected address, expected namespace)
    let table: &[(Env, &str, &str)] = &[
        (&[], "file:7233", "file-ns"),
        (
            &[("TEMPORAL_ADDRESS", "fallback:7233")],
            "fallback:7233",
            "file-ns",
        ),
        (
            &[
                ("TEMPORAL_ADDRESS", "fallback:7233"),
                ("NODEWRIGHT_TEMPORAL_ADDRESS", "primary:7233"),
                ("TEMPORAL_NAMESPACE", "fallback-ns"),
            ],
            "primary:7233",
            "fallback-ns",
        ),
        (
            &[
                ("NODEWRIGHT_TEMPORAL_NAMESPACE", "primary-ns"),
                ("TEMPORAL_NAMESPACE", "fallback-ns"),
            ],
            "file:7233",
            "primary-ns",
        ),
        // An empty variable counts as unset.
        (
            &[("NODEWRIGHT_TEMPORAL_ADDRESS", "")],
            "file:7233",
            "file-ns",
        ),
    ];
    for (env, address, namespace) in table {
        let config = load(Some(&file), env).unwrap_or_else(|error| panic!("valid: {error}"));
        assert_eq!(config.temporal.address, *address, "{env:?}");
        assert_eq!(config.temporal.namespace, *namespace, "{env:?}");
    }

    let config = load(
        Some(&file),
        &[
            ("NODEWRIGHT_CLUSTER", "from-env"),
            ("NODEWRIGHT_SHUTDOWN_SECONDS", "7"),
            ("NODEWRIGHT_LOG_FORMAT", "json"),
            ("NODEWRIGHT_METRICS_ADDRESS", "127.0.0.1:0"),
            ("NODEWRIGHT_ARM_WRITES_PER_SECOND", "0.5"),
            ("NODEWRIGHT_TEMPORAL_TLS", "true"),
            ("TEMPORAL_API_KEY", "fallback-key"),
            ("NODEWRIGHT_TEMPORAL_API_KEY", "primary-key"),
        ],
    )
    .unwrap_or_else(|error| panic!("valid: {error}"));
    assert_eq!(config.cluster.as_str(), "from-env");
    assert_eq!(config.worker.shutdown_grace, Duration::from_secs(7));
    assert_eq!(config.worker.log_format, LogFormat::Json);
    assert_eq!(config.worker.metrics_address.port(), 0);
    assert_eq!(config.azure.arm_writes_per_second, 0.5);
    assert_eq!(config.temporal.api_key, Some(Secret::new("primary-key")));
    assert_eq!(
        config.temporal.tls,
        Some(TemporalTls::default()),
        "an API key implies TLS"
    );
}

#[test]
fn encryption_keys_come_from_a_file_or_a_variable_never_both() {
    let file = MINIMAL;
    let config = load(Some(file), &[]).unwrap_or_else(|error| panic!("valid: {error}"));
    assert_eq!(config.temporal.encryption_keys, None);
    let config = load(
        Some(file),
        &[("NODEWRIGHT_ENCRYPTION_KEYS_FILE", "/keys/nodewright")],
    )
    .unwrap_or_else(|error| panic!("valid: {error}"));
    assert_eq!(
        config.temporal.encryption_keys,
        Some(EncryptionKeys::File(PathBuf::from("/keys/nodewright")))
    );
    let config = load(Some(file), &[("NODEWRIGHT_ENCRYPTION_KEYS", "k1=abc")])
        .unwrap_or_else(|error| panic!("valid: {error}"));
    assert_eq!(
        config.temporal.encryption_keys,
        Some(EncryptionKeys::Inline(Secret::new("k1=abc")))
    );
    let both = load(
        Some(file),
        &[
            ("NODEWRIGHT_ENCRYPTION_KEYS_FILE", "/keys/nodewright"),
            ("NODEWRIGHT_ENCRYPTION_KEYS", "k1=abc"),
        ],
    )
    .expect_err("both");
    let message = both.to_string();
    assert!(message.contains("set one of the two"), "{message}");
    assert!(!message.contains("k1=abc"), "{message}");
}

#[test]
fn auth_modes_take_the_keys_they_need() {
    let with_auth = |auth: &str| {
        format!(
            "cluster = \"c\"\n[azure]\nsubscription_id = \"s\"\nresource_group = \"r\"\nlocation = \"l\"\nsandbox = true\n[azure.auth]\n{auth}\n"
        )
    };
    let table: &[(&str, Env, AzureAuth)] = &[
        ("mode = \"azure-cli\"", &[], AzureAuth::AzureCli),
        (
            "mode = \"managed-identity\"",
            &[],
            AzureAuth::ManagedIdentity { client_id: None },
        ),
        (
            "mode = \"managed-identity\"\nclient_id = \"uai\"",
            &[],
            AzureAuth::ManagedIdentity {
                client_id: Some("uai".to_owned()),
            },
        ),
        (
            "mode = \"static\"",
            &[("NODEWRIGHT_ARM_TOKEN", "t")],
            AzureAuth::Static {
                token: Secret::new("t"),
            },
        ),
        (
            "mode = \"client-secret\"\ntenant_id = \"t\"\nclient_id = \"c\"",
            &[("NODEWRIGHT_AZURE_CLIENT_SECRET", "s")],
            AzureAuth::ClientSecret {
                tenant_id: "t".to_owned(),
                client_id: "c".to_owned(),
                client_secret: Secret::new("s"),
            },
        ),
        (
            "",
            &[
                ("NODEWRIGHT_AZURE_AUTH", "managed-identity"),
                ("NODEWRIGHT_AZURE_CLIENT_ID", "env-uai"),
            ],
            AzureAuth::ManagedIdentity {
                client_id: Some("env-uai".to_owned()),
            },
        ),
    ];
    for (auth, env, expected) in table {
        let config =
            load(Some(&with_auth(auth)), env).unwrap_or_else(|error| panic!("{auth}: {error}"));
        assert_eq!(&config.azure.auth, expected, "{auth}");
    }
}

/// Loads and requires an error whose message (with its causes) contains every fragment.
fn check_error(file: Option<&str>, env: &[(&str, &str)], fragments: &[&str]) {
    let error = match load(file, env) {
        Ok(config) => panic!("expected an error with {fragments:?}, got {config:?}"),
        Err(error) => chain(&error),
    };
    for fragment in fragments {
        assert!(
            error.contains(fragment),
            "{fragment:?} missing from: {error}"
        );
    }
}

#[test]
fn each_error_names_the_key_the_variable_and_the_fix() {
    let with = |extra: &str| format!("{MINIMAL}{extra}");
    let without = |line: &str| MINIMAL.replace(line, "");
    // (case, file, environment, fragments of the message)
    let table: Vec<(&str, Option<String>, Env, &[&str])> = vec![
        (
            "missing subscription id in a file",
            Some(without("subscription_id = \"sub\"")),
            &[],
            &[
                "`azure.subscription_id` is not set",
                "subscription_id = ...` under [azure] in nodewright.toml",
                "NODEWRIGHT_AZURE_SUBSCRIPTION_ID",
            ],
        ),
        (
            "missing cluster without a file",
            None,
            &[],
            &["`cluster` is not set", "NODEWRIGHT_CLUSTER", "--config"],
        ),
        (
            "unknown key",
            Some(with("[temporal]\nadress = \"x:1\"\n")),
            &[],
            &["nodewright.toml:10:1: unknown field `adress`, expected one of `address`"],
        ),
        (
            "unknown section",
            Some(with("[azur]\n")),
            &[],
            &["unknown field `azur`"],
        ),
        (
            "wrong type",
            Some(with("[worker]\nshutdown_grace = \"soon\"\n")),
            &[],
            &["\"soon\" is not a duration", "\"20s\""],
        ),
        (
            "invalid cluster name from the environment",
            Some(MINIMAL.to_owned()),
            &[("NODEWRIGHT_CLUSTER", "Prod")],
            &["NODEWRIGHT_CLUSTER: \"Prod\"", "lowercase", "e.g."],
        ),
        (
            "invalid cluster name in the file",
            Some(MINIMAL.replace("prod-weu", "prod_weu")),
            &[],
            &["`cluster` in nodewright.toml: \"prod_weu\"", "'-'"],
        ),
        (
            "no auth mode",
            Some(without("mode = \"workload-identity\"")),
            &[],
            &["`azure.auth.mode` is not set", "NODEWRIGHT_AZURE_AUTH"],
        ),
        (
            "unknown auth mode in the environment",
            Some(MINIMAL.to_owned()),
            &[("NODEWRIGHT_AZURE_AUTH", "magic")],
            &["NODEWRIGHT_AZURE_AUTH: \"magic\"", "workload-identity"],
        ),
        (
            "unknown auth mode in the file",
            Some(MINIMAL.replace("workload-identity", "magic")),
            &[],
            &["unknown variant `magic`", "workload-identity"],
        ),
        (
            "static without a token",
            Some(MINIMAL.replace("workload-identity", "static")),
            &[],
            &["`azure.auth.token` is not set", "NODEWRIGHT_ARM_TOKEN"],
        ),
        (
            "client-secret without a tenant",
            Some(MINIMAL.replace(
                "mode = \"workload-identity\"",
                "mode = \"client-secret\"\nclient_id = \"c\"\nclient_secret = \"s\"",
            )),
            &[],
            &[
                "`azure.auth.tenant_id` is not set",
                "NODEWRIGHT_AZURE_TENANT_ID",
            ],
        ),
        (
            "a leftover token with another mode",
            Some(MINIMAL.to_owned()),
            &[("NODEWRIGHT_ARM_TOKEN", "t")],
            &[
                "`azure.auth.token` (NODEWRIGHT_ARM_TOKEN) is not used",
                "\"workload-identity\" (`azure.auth.mode` in nodewright.toml)",
            ],
        ),
        (
            "a client certificate without its key",
            Some(with("[temporal.tls]\nclient_cert = \"c.pem\"\n")),
            &[],
            &[
                "`temporal.tls.client_cert` is set but `temporal.tls.client_key` is not",
                "NODEWRIGHT_TEMPORAL_TLS_CERT and NODEWRIGHT_TEMPORAL_TLS_KEY",
            ],
        ),
        (
            "a client key without its certificate",
            Some(MINIMAL.to_owned()),
            &[("NODEWRIGHT_TEMPORAL_TLS_KEY", "k.pem")],
            &["`temporal.tls.client_key` is set but `temporal.tls.client_cert` is not"],
        ),
        (
            "TLS turned off with an API key",
            Some(with(
                "[temporal]\napi_key = \"k\"\n[temporal.tls]\nenabled = false\n",
            )),
            &[],
            &[
                "TLS is turned off (`temporal.tls.enabled` in nodewright.toml)",
                "temporal.api_key",
            ],
        ),
        (
            "an http:// address with TLS",
            Some(with("[temporal]\naddress = \"http://t:7233\"\n")),
            &[("NODEWRIGHT_TEMPORAL_TLS", "true")],
            &["says http:// but TLS is on"],
        ),
        (
            "a zero write rate",
            Some(with("").replace("[azure]", "[azure]\narm_writes_per_second = 0.0")),
            &[],
            &[
                "`azure.arm_writes_per_second` in nodewright.toml: \"0\"",
                "above 0",
            ],
        ),
        (
            "a write rate that is not a number",
            Some(MINIMAL.to_owned()),
            &[("NODEWRIGHT_ARM_WRITES_PER_SECOND", "fast")],
            &["NODEWRIGHT_ARM_WRITES_PER_SECOND: \"fast\" is not a number"],
        ),
        (
            "shutdown seconds with a unit",
            Some(MINIMAL.to_owned()),
            &[("NODEWRIGHT_SHUTDOWN_SECONDS", "20s")],
            &["NODEWRIGHT_SHUTDOWN_SECONDS: \"20s\" is not a whole number of seconds"],
        ),
        (
            "a host name as a listen address",
            Some(MINIMAL.to_owned()),
            &[("NODEWRIGHT_HEALTH_ADDRESS", "localhost:8080")],
            &["NODEWRIGHT_HEALTH_ADDRESS", "IP:port"],
        ),
        (
            "an ARM endpoint without a scheme",
            Some(MINIMAL.to_owned()),
            &[("NODEWRIGHT_ARM_ENDPOINT", "management.azure.com")],
            &["NODEWRIGHT_ARM_ENDPOINT: \"management.azure.com\" is not an http(s) URL"],
        ),
        (
            "a Key Vault endpoint without a scheme",
            Some(MINIMAL.to_owned()),
            &[("NODEWRIGHT_KEYVAULT_ENDPOINT", "127.0.0.1:8443/keyvault")],
            &["NODEWRIGHT_KEYVAULT_ENDPOINT: \"127.0.0.1:8443/keyvault\" is not an http(s) URL"],
        ),
        (
            "a Key Vault token with an identity mode",
            Some(MINIMAL.to_owned()),
            &[("NODEWRIGHT_KEYVAULT_TOKEN", "t")],
            &[
                "`azure.auth.key_vault_token` (NODEWRIGHT_KEYVAULT_TOKEN) is not used",
                "\"workload-identity\"",
            ],
        ),
        (
            "an empty required value in the file",
            Some(MINIMAL.replace("location = \"westeurope\"", "location = \"\"")),
            &[],
            &[
                "`azure.location` in nodewright.toml: \"\" is empty",
                "NODEWRIGHT_AZURE_LOCATION",
            ],
        ),
        (
            "a bad log format",
            Some(MINIMAL.to_owned()),
            &[("NODEWRIGHT_LOG_FORMAT", "yaml")],
            &["NODEWRIGHT_LOG_FORMAT: \"yaml\"", "text or json"],
        ),
    ];
    for (case, file, env, fragments) in &table {
        eprintln!("case: {case}");
        check_error(file.as_deref(), env, fragments);
    }
}

#[test]
fn secrets_never_appear_in_debug_output_or_errors() {
    let config = load(
        Some(&MINIMAL.replace(
            "mode = \"workload-identity\"",
            "mode = \"client-secret\"\ntenant_id = \"t\"\nclient_id = \"c\"\nclient_secret = \"client-s3cret\"",
        )),
        &[("NODEWRIGHT_TEMPORAL_API_KEY", "api-s3cret")],
    )
    .unwrap_or_else(|error| panic!("valid: {error}"));
    let debug = format!("{config:?}");
    assert!(!debug.contains("s3cret"), "{debug}");
    assert!(debug.contains("<redacted>"), "{debug}");

    let error = load(Some(MINIMAL), &[("NODEWRIGHT_ARM_TOKEN", "token-s3cret")]).map_or_else(
        |error| error,
        |config| {
            panic!(
                "{}: {config:?}",
                "a token with workload identity is refused"
            )
        },
    );
    assert!(!chain(&error).contains("s3cret"), "{error}");
    assert!(!format!("{error:?}").contains("s3cret"), "{error:?}");
}

#[test]
fn the_cli_needs_only_the_cluster_and_temporal() {
    let env = [
        ("NODEWRIGHT_CLUSTER", "dev"),
        ("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
    ];
    let config = ClientConfig::load(None, "nodewright.toml", env_of(&env))
        .unwrap_or_else(|error| panic!("valid: {error}"));
    assert_eq!(config.cluster.as_str(), "dev");
    assert_eq!(config.temporal.task_queue, "nodewright-dev");
    assert!(load(None, &env).is_err(), "the worker needs Azure");
    let explicit = [("NODEWRIGHT_TASK_QUEUE", "shared"), env[0], env[1]];
    let config = ClientConfig::load(None, "nodewright.toml", env_of(&explicit))
        .unwrap_or_else(|error| panic!("valid: {error}"));
    assert_eq!(
        config.temporal.task_queue, "shared",
        "an explicit queue wins"
    );

    let error = ClientConfig::load(
        Some("cluster = \"dev\"\n[temporal]\nnamespce = \"x\"\n"),
        "f.toml",
        env_of(&[]),
    )
    .map_or_else(|error| error, |config| panic!("misspelt key: {config:?}"));
    assert!(
        chain(&error).contains("unknown field `namespce`"),
        "{error}"
    );
}

#[test]
fn the_example_file_loads_and_documents_every_variable() {
    let config = ClusterConfig::load(Some(EXAMPLE), "nodewright.example.toml", |_| None)
        .unwrap_or_else(|error| panic!("the example is valid: {error}"));
    assert_eq!(config.cluster.as_str(), "prod-weu");
    assert_eq!(config.azure.auth, AzureAuth::WorkloadIdentity);
    assert_eq!(config.temporal.tls, None);
    let defaults = load(Some(MINIMAL), &[]).unwrap_or_else(|error| panic!("valid: {error}"));
    assert_eq!(
        config.temporal, defaults.temporal,
        "the example shows the defaults"
    );
    assert_eq!(
        config.worker, defaults.worker,
        "the example shows the defaults"
    );

    for var in ENV_VARS {
        assert!(
            EXAMPLE.contains(var.name()),
            "nodewright.example.toml does not mention {}",
            var.name()
        );
        let name = var.key().rsplit('.').next().unwrap_or_default();
        assert!(
            EXAMPLE.contains(&format!("{name} = ")),
            "nodewright.example.toml does not show the key {}",
            var.key()
        );
    }
}

#[test]
fn every_key_has_exactly_one_primary_variable_with_a_meaning() {
    let mut primaries: HashMap<&str, &str> = HashMap::new();
    for var in ENV_VARS {
        assert!(!var.meaning().is_empty(), "{}", var.name());
        assert!(
            ENV_VARS
                .iter()
                .filter(|other| other.name() == var.name())
                .count()
                == 1,
            "{} is listed twice",
            var.name()
        );
        if !var.is_fallback() {
            assert_eq!(
                primaries.insert(var.key(), var.name()),
                None,
                "two primaries for {}",
                var.key()
            );
        }
    }
    for var in ENV_VARS.iter().filter(|var| var.is_fallback()) {
        assert!(
            primaries.contains_key(var.key()),
            "fallback {} has no primary",
            var.name()
        );
    }
}

/// The address forms and whether each is loopback.
#[test]
fn loopback_addresses_are_127_slash_8_ipv6_one_and_localhost_only() {
    let table = [
        ("127.0.0.1:7233", "127.0.0.1", true),
        ("127.1.2.3:7233", "127.1.2.3", true),
        ("localhost:7233", "localhost", true),
        ("LOCALHOST.:7233", "LOCALHOST.", true),
        ("[::1]:7233", "::1", true),
        ("::1", "::1", true),
        ("[::ffff:127.0.0.1]:7233", "::ffff:127.0.0.1", true),
        ("http://127.0.0.1:8443", "127.0.0.1", true),
        ("http://127.0.0.1:8443/keyvault", "127.0.0.1", true),
        ("http://user@localhost:8443/x?y", "localhost", true),
        ("https://[::1]:7233/", "::1", true),
        ("127.0.0.1", "127.0.0.1", true),
        ("128.0.0.1:7233", "128.0.0.1", false),
        ("0.0.0.0:7233", "0.0.0.0", false),
        ("10.0.0.5:7233", "10.0.0.5", false),
        ("[::]:7233", "::", false),
        ("[fe80::1]:7233", "fe80::1", false),
        ("temporal:7233", "temporal", false),
        ("localhost.example.com:7233", "localhost.example.com", false),
        ("127.0.0.1.nip.io:7233", "127.0.0.1.nip.io", false),
        ("http://sandbox:8443", "sandbox", false),
        ("http://localhost@evil.example:80", "evil.example", false),
        ("ns.acct.tmprl.cloud:7233", "ns.acct.tmprl.cloud", false),
    ];
    for (address, host, loopback) in table {
        assert_eq!(address_host(address), host, "{address}");
        assert_eq!(is_loopback_address(address), loopback, "{address}");
    }
}

/// The start-up line, or fragments of the refusal.
type Expected = Result<&'static str, &'static [&'static str]>;

/// (case, environment, expected).
#[test]
fn plain_text_to_temporal_is_allowed_to_loopback_or_on_purpose_only() {
    let table: &[(&str, Env, Expected)] = &[
        (
            "default address",
            &[],
            Ok("PLAIN TEXT to 127.0.0.1:7233 (loopback)"),
        ),
        (
            "localhost",
            &[("NODEWRIGHT_TEMPORAL_ADDRESS", "localhost:7233")],
            Ok("PLAIN TEXT to localhost:7233 (loopback)"),
        ),
        (
            "IPv6 loopback",
            &[("NODEWRIGHT_TEMPORAL_ADDRESS", "[::1]:7233")],
            Ok("PLAIN TEXT to [::1]:7233 (loopback)"),
        ),
        (
            "a host name without TLS",
            &[("NODEWRIGHT_TEMPORAL_ADDRESS", "temporal:7233")],
            Err(&[
                "temporal.address \"temporal:7233\" is not a loopback address",
                "NODEWRIGHT_TEMPORAL_TLS_CERT",
                "NODEWRIGHT_TEMPORAL_TLS_KEY",
                "NODEWRIGHT_TEMPORAL_TLS_CA",
                "temporal.api_key_file or temporal.api_key",
                "temporal.tls.enabled = false (NODEWRIGHT_TEMPORAL_TLS=false)",
            ]),
        ),
        (
            "an IP address without TLS, from the Temporal CLI's variable",
            &[("TEMPORAL_ADDRESS", "10.0.0.5:7233")],
            Err(&["\"10.0.0.5:7233\" is not a loopback address"]),
        ),
        (
            "an http:// URL to a non-loopback host",
            &[("NODEWRIGHT_TEMPORAL_ADDRESS", "http://temporal:7233")],
            Err(&["is not a loopback address"]),
        ),
        (
            "a non-loopback IPv6 address",
            &[("NODEWRIGHT_TEMPORAL_ADDRESS", "[fd00::5]:7233")],
            Err(&["is not a loopback address"]),
        ),
        (
            "the explicit off",
            &[
                ("NODEWRIGHT_TEMPORAL_ADDRESS", "temporal:7233"),
                ("NODEWRIGHT_TEMPORAL_TLS", "false"),
            ],
            Ok("PLAIN TEXT to temporal:7233 (temporal.tls.enabled = false)"),
        ),
        (
            "mTLS",
            &[
                ("NODEWRIGHT_TEMPORAL_ADDRESS", "temporal:7233"),
                ("NODEWRIGHT_TEMPORAL_TLS_CERT", "/tls/tls.crt"),
                ("NODEWRIGHT_TEMPORAL_TLS_KEY", "/tls/tls.key"),
                ("NODEWRIGHT_TEMPORAL_TLS_CA", "/tls/ca.crt"),
            ],
            Ok("mTLS to temporal:7233 (client certificate /tls/tls.crt, CA /tls/ca.crt)"),
        ),
        (
            "an API key file",
            &[
                ("NODEWRIGHT_TEMPORAL_ADDRESS", "ns.acct.tmprl.cloud:7233"),
                ("NODEWRIGHT_TEMPORAL_API_KEY_FILE", "/keys/temporal"),
            ],
            Ok(
                "API key over TLS to ns.acct.tmprl.cloud:7233 (API key from /keys/temporal, CA the system's CAs)",
            ),
        ),
        (
            "an API key value",
            &[
                ("NODEWRIGHT_TEMPORAL_ADDRESS", "ns.acct.tmprl.cloud:7233"),
                ("NODEWRIGHT_TEMPORAL_API_KEY", "k3y"),
            ],
            Ok(
                "API key over TLS to ns.acct.tmprl.cloud:7233 (API key from temporal.api_key, CA the system's CAs)",
            ),
        ),
        (
            "an API key file and value",
            &[
                ("NODEWRIGHT_TEMPORAL_API_KEY_FILE", "/keys/temporal"),
                ("NODEWRIGHT_TEMPORAL_API_KEY", "k3y"),
            ],
            Err(&["NODEWRIGHT_TEMPORAL_API_KEY_FILE", "set one of the two"]),
        ),
        (
            "an API key file with TLS off",
            &[
                ("NODEWRIGHT_TEMPORAL_API_KEY_FILE", "/keys/temporal"),
                ("NODEWRIGHT_TEMPORAL_TLS", "false"),
            ],
            Err(&["TLS is turned off", "temporal.api_key_file needs it"]),
        ),
        (
            "TLS alone",
            &[
                ("NODEWRIGHT_TEMPORAL_ADDRESS", "temporal:7233"),
                ("NODEWRIGHT_TEMPORAL_TLS", "true"),
            ],
            Ok(
                "TLS to temporal:7233 (CA the system's CAs; no client certificate nor API key: the server must authorize by network)",
            ),
        ),
    ];
    for (case, env, expected) in table {
        let mut pairs = vec![("NODEWRIGHT_CLUSTER", "dev")];
        pairs.extend_from_slice(env);
        let loaded = ClientConfig::load(None, "nodewright.toml", env_of(&pairs));
        match (loaded, expected) {
            (Ok(config), Ok(line)) => {
                assert_eq!(&config.temporal.transport_summary(), line, "{case}");
                assert!(
                    !config.temporal.transport_summary().contains("k3y"),
                    "{case}"
                );
            }
            (Err(error), Err(fragments)) => {
                let message = chain(&error);
                for fragment in *fragments {
                    assert!(
                        message.contains(fragment),
                        "{case}: {fragment} missing from {message}"
                    );
                }
                assert!(!message.contains("k3y"), "{case}: {message}");
            }
            (Ok(config), Err(_)) => panic!(
                "{case}: expected a refusal, got {}",
                config.temporal.transport_summary()
            ),
            (Err(error), Ok(_)) => panic!("{case}: refused: {}", chain(&error)),
        }
    }
}

/// (case, environment over the local stack's, None or fragments of the refusal).
#[test]
fn http_endpoints_and_static_tokens_need_loopback_or_the_sandbox_flag() {
    let table: &[(&str, Env, Option<&[&str]>)] = &[
        ("the local stack", &[], None),
        (
            "a sandbox at a service name",
            &[("NODEWRIGHT_ARM_ENDPOINT", "http://sandbox:8443")],
            Some(&[
                "NODEWRIGHT_ARM_ENDPOINT",
                "\"http://sandbox:8443\"",
                "plain http:// to a non-loopback host",
                "azure.sandbox = true` (NODEWRIGHT_AZURE_SANDBOX)",
            ]),
        ),
        (
            "a sandbox at a service name, flagged",
            &[
                ("NODEWRIGHT_ARM_ENDPOINT", "http://sandbox:8443"),
                (
                    "NODEWRIGHT_KEYVAULT_ENDPOINT",
                    "http://sandbox:8443/keyvault",
                ),
                ("NODEWRIGHT_AZURE_SANDBOX", "true"),
            ],
            None,
        ),
        (
            "a Key Vault endpoint over http",
            &[("NODEWRIGHT_KEYVAULT_ENDPOINT", "http://10.1.2.3/keyvault")],
            Some(&["NODEWRIGHT_KEYVAULT_ENDPOINT", "plain http://"]),
        ),
        (
            "a static token for https Azure",
            &[("NODEWRIGHT_ARM_ENDPOINT", "https://management.azure.com")],
            Some(&[
                "azure.auth.mode = \"static\"",
                "NODEWRIGHT_ARM_TOKEN",
                "\"https://management.azure.com\" is not a loopback address",
                "workload-identity",
                "NODEWRIGHT_AZURE_SANDBOX",
            ]),
        ),
        (
            "a static token for an https sandbox, flagged",
            &[
                ("NODEWRIGHT_ARM_ENDPOINT", "https://sandbox.test"),
                ("NODEWRIGHT_AZURE_SANDBOX", "1"),
            ],
            None,
        ),
        (
            "the flag off is the default",
            &[
                ("NODEWRIGHT_ARM_ENDPOINT", "http://sandbox:8443"),
                ("NODEWRIGHT_AZURE_SANDBOX", "false"),
            ],
            Some(&["plain http://"]),
        ),
        (
            "IPv6 loopback",
            &[
                ("NODEWRIGHT_ARM_ENDPOINT", "http://[::1]:8443"),
                (
                    "NODEWRIGHT_KEYVAULT_ENDPOINT",
                    "http://localhost:8443/keyvault",
                ),
            ],
            None,
        ),
    ];
    for (case, env, expected) in table {
        let mut pairs = LOCAL_STACK_ENV.to_vec();
        pairs.extend_from_slice(env);
        // Later entries win: the map keeps the last value of a name.
        match (load(None, &pairs), expected) {
            (Ok(config), None) => {
                let flagged = env
                    .iter()
                    .any(|(name, value)| *name == "NODEWRIGHT_AZURE_SANDBOX" && *value != "false");
                assert_eq!(config.azure.sandbox, flagged, "{case}");
            }
            (Err(error), Some(fragments)) => {
                let message = chain(&error);
                for fragment in *fragments {
                    assert!(
                        message.contains(fragment),
                        "{case}: {fragment} missing from {message}"
                    );
                }
                assert!(!message.contains("sandbox-token"), "{case}: {message}");
            }
            (Ok(_), Some(_)) => panic!("{case}: expected a refusal"),
            (Err(error), None) => panic!("{case}: refused: {}", chain(&error)),
        }
    }
}
