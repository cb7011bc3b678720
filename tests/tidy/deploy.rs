//! `deploy/` against the workspace: the worker image is named by the workspace's version (never
//! `:latest`, never another version) in every file of `deploy/` and its folders (the chart's
//! included), and the NetworkPolicy admits exactly the Deployment's ports. Needs no stack.

use std::collections::BTreeSet;
use std::fs;

use serde_json::Value;

use super::{entries, read, repo_root};

/// The workspace version of Cargo.toml.
pub(super) fn workspace_version() -> String {
    let text = read(&repo_root().join("Cargo.toml"));
    let manifest: toml::Table = toml::from_str(&text).expect("Cargo.toml is TOML");
    manifest["workspace"]["package"]["version"]
        .as_str()
        .expect("workspace.package.version")
        .to_owned()
}

/// Every file of `deploy/` and its folders, with its path under `deploy/` and its text.
fn deploy_files() -> Vec<(String, String)> {
    let deploy = repo_root().join("deploy");
    let mut folders = vec![deploy.clone()];
    let mut files = Vec::new();
    while let Some(folder) = folders.pop() {
        for path in entries(&folder) {
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            let name = path
                .strip_prefix(&deploy)
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default();
            files.push((name, read(&path)));
        }
    }
    files.sort();
    files
}

fn yaml(file: &str) -> Value {
    let text = fs::read_to_string(repo_root().join("deploy").join(file))
        .unwrap_or_else(|error| panic!("reading deploy/{file}: {error}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|error| panic!("deploy/{file}: {error}"))
}

/// The version a reference names after `ghcr.io/nodewright/nodewright:` (up to `@` or the end).
fn tags_in(text: &str) -> Vec<String> {
    const IMAGE: &str = "ghcr.io/nodewright/nodewright:";
    text.match_indices(IMAGE)
        .map(|(at, _)| {
            text[at + IMAGE.len()..]
                .split(|c: char| c.is_whitespace() || c == '@' || c == '"')
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn deploy_names_the_worker_image_by_the_workspace_version() {
    let version = workspace_version();
    let mut violations = Vec::new();
    let mut references = 0;
    for (file, text) in deploy_files() {
        for (number, line) in text.lines().enumerate() {
            let code = line.split('#').next().unwrap_or_default();
            if code.contains(":latest") {
                violations.push(format!("deploy/{file}:{}: names :latest", number + 1));
            }
            if let Some(tag) = code.trim().strip_prefix("newTag:") {
                references += 1;
                let tag = tag.trim().trim_matches('"');
                if tag != version {
                    violations.push(format!(
                        "deploy/{file}:{}: newTag {tag} is not the workspace version {version}",
                        number + 1
                    ));
                }
            }
            for tag in tags_in(code) {
                references += 1;
                if tag != version {
                    violations.push(format!(
                        "deploy/{file}:{}: image tag {tag} is not the workspace version {version}",
                        number + 1
                    ));
                }
            }
        }
    }
    assert!(
        references >= 2,
        "deployment.yaml and kustomization.yaml name the image"
    );
    assert!(
        violations.is_empty(),
        "set the worker image to the workspace version (Cargo.toml):\n  {}",
        violations.join("\n  ")
    );
}

#[test]
fn image_tags_other_than_the_version_are_found() {
    assert_eq!(
        tags_in("image: ghcr.io/nodewright/nodewright:0.2.0@sha256:ab"),
        ["0.2.0"]
    );
    assert_eq!(
        tags_in("image: ghcr.io/nodewright/nodewright:latest"),
        ["latest"]
    );
}

#[test]
fn the_network_policy_admits_exactly_the_deployment_ports() {
    let deployment = yaml("deployment.yaml");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let container_ports: BTreeSet<u64> = container["ports"]
        .as_array()
        .expect("the container has ports")
        .iter()
        .map(|port| port["containerPort"].as_u64().expect("containerPort"))
        .collect();
    let policy = yaml("networkpolicy.yaml");
    let ingress_ports: BTreeSet<u64> = policy["spec"]["ingress"]
        .as_array()
        .expect("the policy has ingress rules")
        .iter()
        .flat_map(|rule| rule["ports"].as_array().cloned().unwrap_or_default())
        .map(|port| port["port"].as_u64().expect("numeric ingress port"))
        .collect();
    assert_eq!(
        ingress_ports, container_ports,
        "deploy/networkpolicy.yaml's ingress ports are deployment.yaml's container ports"
    );
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"], deployment["spec"]["selector"]["matchLabels"],
        "the policy selects the Deployment's pods"
    );
    // The ConfigMap's worker addresses listen on the same ports.
    let config_map = yaml("configmap.yaml");
    let config: toml::Table = toml::from_str(
        config_map["data"]["nodewright.toml"]
            .as_str()
            .expect("nodewright.toml"),
    )
    .expect("nodewright.toml is TOML");
    let listened: BTreeSet<u64> = ["health_address", "metrics_address"]
        .iter()
        .map(|key| {
            config["worker"][key]
                .as_str()
                .and_then(|address| address.rsplit(':').next())
                .and_then(|port| port.parse().ok())
                .unwrap_or_else(|| panic!("worker.{key} has a port"))
        })
        .collect();
    assert_eq!(listened, container_ports, "the worker listens on the ports");
}
