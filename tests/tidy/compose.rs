//! `docker-compose.yml` and the Dockerfiles against the code: the compose file passes
//! `docker-compose config -q` (installed by `dev/install --test-tools`, no Docker daemon
//! needed), the worker's environment is one the configuration code reads and accepts, the images
//! run binaries the workspace builds, and the ports line up. Needs no stack.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::process::Command;

use nodewright_model::SearchAttribute;
use nodewright_model::config::{
    ClusterConfig, DEFAULT_HEALTH_ADDRESS, DEFAULT_METRICS_ADDRESS, ENV_VARS,
};
use serde_json::Value;

use super::repo_root;

/// The compose file, parsed (anchors resolved, no interpolation).
fn compose() -> Value {
    let text = read("docker-compose.yml");
    serde_saphyr::from_str(&text).expect("docker-compose.yml is YAML")
}

fn read(relative: &str) -> String {
    let path = repo_root().join(relative);
    fs::read_to_string(&path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
}

fn service<'a>(compose: &'a Value, name: &str) -> &'a Value {
    compose["services"]
        .get(name)
        .unwrap_or_else(|| panic!("docker-compose.yml has no service {name:?}"))
}

/// A service's `environment`, written as a map.
fn environment(service: &Value) -> BTreeMap<String, String> {
    let map = service["environment"]
        .as_object()
        .expect("environment is written as a map");
    map.iter()
        .map(|(name, value)| {
            let value = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            (name.clone(), value)
        })
        .collect()
}

/// The container side of a service's `ports` ("8081:8080" → 8080).
fn container_ports(service: &Value) -> BTreeSet<u16> {
    service["ports"]
        .as_array()
        .map(|ports| {
            ports
                .iter()
                .map(|port| {
                    let text = port
                        .as_str()
                        .expect("ports are written as \"host:container\"");
                    let container = text.rsplit(':').next().unwrap_or(text);
                    container.parse().expect("a container port is a number")
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The port of `host:port`, `http://host:port` or `ip:port`.
fn port_of(address: &str) -> u16 {
    let address = address.rsplit("://").next().unwrap_or(address);
    let port = address.rsplit(':').next().unwrap_or_default();
    port.trim_end_matches('/')
        .parse()
        .unwrap_or_else(|_| panic!("{address:?} names no port"))
}

fn host_of(address: &str) -> &str {
    let address = address.rsplit("://").next().unwrap_or(address);
    address.split(':').next().unwrap_or_default()
}

/// One Dockerfile instruction's arguments, every time it appears (`EXPOSE`, `ENTRYPOINT`, `ENV`).
fn instructions(dockerfile: &str, instruction: &str) -> Vec<String> {
    dockerfile
        .lines()
        .filter_map(|line| line.strip_prefix(instruction)?.strip_prefix(' '))
        .map(|rest| rest.trim().to_owned())
        .collect()
}

fn exposed(dockerfile: &str) -> BTreeSet<u16> {
    instructions(dockerfile, "EXPOSE")
        .iter()
        .flat_map(|ports| {
            ports
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .map(|port| port.parse().expect("EXPOSE takes port numbers"))
        .collect()
}

/// The binary the image's one `ENTRYPOINT ["/usr/local/bin/<binary>"]` runs.
fn entrypoint_binary(dockerfile: &str) -> String {
    let entrypoints = instructions(dockerfile, "ENTRYPOINT");
    assert_eq!(entrypoints.len(), 1, "one ENTRYPOINT: {entrypoints:?}");
    let binary = entrypoints[0]
        .trim_start_matches("[\"")
        .trim_end_matches("\"]")
        .to_owned();
    binary
        .strip_prefix("/usr/local/bin/")
        .unwrap_or_else(|| panic!("the ENTRYPOINT {binary:?} is not in /usr/local/bin"))
        .to_owned()
}

/// The `[[bin]]` names of a crate's manifest.
fn binaries(crate_dir: &str) -> BTreeSet<String> {
    let manifest = read(&format!("{crate_dir}/Cargo.toml"));
    let mut names = BTreeSet::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && let Some(name) = line.strip_prefix("name = ") {
            names.insert(name.trim_matches('"').to_owned());
        }
    }
    names
}

/// The package name of a crate's manifest.
fn package(crate_dir: &str) -> String {
    let manifest = read(&format!("{crate_dir}/Cargo.toml"));
    let name = manifest
        .lines()
        .find_map(|line| line.strip_prefix("name = "))
        .expect("the manifest names its package first");
    name.trim_matches('"').to_owned()
}

/// The `env = "..."` names of the sandbox's flags.
fn sandbox_env_vars() -> BTreeSet<String> {
    read("sandbox/src/main.rs")
        .split("env = \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn compose_file_passes_docker_compose_config() {
    let output = Command::new("docker-compose")
        .args(["-f", "docker-compose.yml", "config", "-q"])
        .current_dir(repo_root())
        // The default kubeconfig path need not exist: only the file's validity is checked.
        .env("HOST_KUBECONFIG", "/dev/null")
        .output();
    let output = match output {
        Ok(output) => output,
        Err(error) => panic!(
            "cannot run docker-compose ({error}): run dev/install --test-tools, which installs it \
             (apt-get install docker-compose)"
        ),
    };
    assert!(
        output.status.success(),
        "docker-compose config -q refuses docker-compose.yml:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn worker_environment_is_read_and_accepted_by_the_config_code() {
    let compose = compose();
    let env = environment(service(&compose, "worker"));
    let known: BTreeSet<&str> = ENV_VARS.iter().map(|var| var.name()).collect();
    let unknown: Vec<&String> = env
        .keys()
        .filter(|name| name.starts_with("NODEWRIGHT_") || name.starts_with("TEMPORAL_"))
        .filter(|name| !known.contains(name.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "the worker's environment sets variables the config code does not read: {unknown:?}"
    );
    assert_eq!(
        env.get("KUBECONFIG").map(String::as_str),
        Some("/etc/nodewright/kubeconfig"),
        "KUBECONFIG names the mounted kubeconfig"
    );

    let config = ClusterConfig::load(None, "docker-compose.yml", |name| env.get(name).cloned())
        .unwrap_or_else(|error| panic!("the worker's environment is refused: {error}"));
    assert_eq!(config.temporal.address, "temporal:7233");
    assert_eq!(
        config.kubernetes.kubeconfig.as_deref(),
        Some(std::path::Path::new("/etc/nodewright/kubeconfig"))
    );
}

#[test]
fn worker_reaches_services_of_the_compose_file() {
    let compose = compose();
    let worker = environment(service(&compose, "worker"));
    let sandbox = environment(service(&compose, "sandbox"));

    let temporal = &worker["NODEWRIGHT_TEMPORAL_ADDRESS"];
    service(&compose, host_of(temporal));
    assert_eq!(port_of(temporal), 7233, "Temporal's frontend port");

    let arm = &worker["NODEWRIGHT_ARM_ENDPOINT"];
    assert_eq!(host_of(arm), "sandbox");
    assert_eq!(
        port_of(arm),
        port_of(&sandbox["NODEWRIGHT_SANDBOX_LISTEN"]),
        "the worker's ARM endpoint is where the sandbox listens"
    );
    assert_eq!(
        worker["NODEWRIGHT_ARM_TOKEN"], sandbox["NODEWRIGHT_SANDBOX_TOKEN"],
        "the worker sends the token the sandbox requires"
    );
    assert_eq!(
        worker["NODEWRIGHT_AZURE_SUBSCRIPTION_ID"], sandbox["NODEWRIGHT_SANDBOX_SUBSCRIPTION_ID"],
        "the sandbox's node joiner owns the worker's subscription"
    );

    let sandbox_vars = sandbox_env_vars();
    let unknown: Vec<&String> = sandbox
        .keys()
        .filter(|name| name.starts_with("NODEWRIGHT_"))
        .filter(|name| !sandbox_vars.contains(*name))
        .collect();
    assert!(
        unknown.is_empty(),
        "the sandbox's environment sets variables sandbox/src/main.rs does not read: {unknown:?}"
    );
}

#[test]
fn search_attributes_service_registers_every_attribute_as_keyword() {
    let compose = compose();
    let setup = service(&compose, "temporal-search-attributes");
    let script = setup["command"].to_string();
    for attribute in SearchAttribute::ALL {
        assert!(
            script.contains(attribute.name()),
            "the search attributes service does not register {}",
            attribute.name()
        );
    }
    assert!(script.contains("--type Keyword"));
    let dependents = &service(&compose, "worker")["depends_on"]["temporal-search-attributes"];
    assert_eq!(
        dependents["condition"], "service_completed_successfully",
        "the worker starts once the attributes exist"
    );
}

#[test]
fn images_run_binaries_of_the_workspace() {
    let worker_image = read("Dockerfile");
    let sandbox_image = read("sandbox/Dockerfile");
    let cases = [
        (&worker_image, "worker", vec!["worker", "starter"]),
        (&sandbox_image, "sandbox", vec!["sandbox"]),
    ];
    for (dockerfile, entry_crate, crates) in cases {
        let entrypoint = entrypoint_binary(dockerfile);
        assert!(
            binaries(entry_crate).contains(&entrypoint),
            "ENTRYPOINT {entrypoint:?} is not a [[bin]] of {entry_crate}/Cargo.toml"
        );
        for crate_dir in crates {
            let package = package(crate_dir);
            assert!(
                dockerfile.contains(&format!("-p {package}")),
                "the image does not build package {package}"
            );
            for binary in binaries(crate_dir) {
                assert!(
                    dockerfile.contains(&format!("target/release/{binary}")),
                    "the image does not copy {binary} out of target/release"
                );
            }
        }
    }
    assert!(
        worker_image.contains("/out/nodewright-worker /out/nodewright /usr/local/bin/"),
        "both binaries are in /usr/local/bin"
    );
    for dockerfile in [&worker_image, &sandbox_image] {
        assert!(
            dockerfile.contains("USER 65532"),
            "the image runs as uid 65532"
        );
    }
}

#[test]
fn ports_match_the_code_defaults_and_the_compose_file() {
    let compose = compose();
    let worker_image = read("Dockerfile");
    let sandbox_image = read("sandbox/Dockerfile");

    // The worker image exposes the defaults; compose publishes what the worker listens on.
    let health = DEFAULT_HEALTH_ADDRESS.port();
    let metrics = DEFAULT_METRICS_ADDRESS.port();
    assert_eq!(exposed(&worker_image), BTreeSet::from([health, metrics]));
    let worker = service(&compose, "worker");
    let env = environment(worker);
    let listens: BTreeSet<u16> = ["NODEWRIGHT_HEALTH_ADDRESS", "NODEWRIGHT_METRICS_ADDRESS"]
        .iter()
        .map(|name| port_of(env.get(*name).expect("the worker's addresses are set")))
        .collect();
    assert_eq!(listens, BTreeSet::from([health, metrics]));
    assert_eq!(container_ports(worker), listens);

    // The sandbox listens on all interfaces on the port its image exposes and compose publishes.
    let sandbox = service(&compose, "sandbox");
    let listen = &environment(sandbox)["NODEWRIGHT_SANDBOX_LISTEN"];
    assert!(
        listen.starts_with("0.0.0.0:"),
        "{listen} is reachable from other containers"
    );
    let env_lines = instructions(&sandbox_image, "ENV");
    assert!(
        env_lines.contains(&format!("NODEWRIGHT_SANDBOX_LISTEN={listen}")),
        "the image listens where compose says: {env_lines:?}"
    );
    assert_eq!(exposed(&sandbox_image), BTreeSet::from([port_of(listen)]));
    assert_eq!(container_ports(sandbox), BTreeSet::from([port_of(listen)]));
}
