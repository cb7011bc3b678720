//! The Kubernetes objects nodewright ships, from either of its two sources: the plain manifests
//! of `deploy/` (the files `deploy/kustomization.yaml` lists) and the Helm chart
//! `deploy/helm/nodewright`, rendered by a real `helm template` into the namespace the plain
//! manifests use. The least-privilege test (`tests/e2e/rbac.rs`) and the tidy test take their
//! RBAC from here, so both sources are held to the same rules.
//!
//! Helm is the one `dev/install --test-tools` builds (`HELM_HOME` of `dev/lib.sh`), or the
//! binary `NODEWRIGHT_HELM` names. Neither needs the stack.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

use crate::stack::repo_root;

/// The release name and namespace the chart is rendered with: the plain manifests' namespace.
pub const RELEASE: &str = "nodewright";
/// The namespace of the plain manifests, and of the chart's rendering.
pub const NAMESPACE: &str = "nodewright";
/// The chart, relative to the repository.
pub const CHART: &str = "deploy/helm/nodewright";

/// Where the shipped objects come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `deploy/*.yaml`, as `kubectl apply -k deploy/` applies them.
    Manifests,
    /// `helm template` of the chart with its default values.
    Chart,
}

impl Source {
    /// Both sources.
    pub const ALL: [Source; 2] = [Source::Manifests, Source::Chart];

    /// Every object of the source (documents that hold nothing are dropped).
    pub fn objects(self) -> Result<Vec<Value>> {
        match self {
            Source::Manifests => manifests(),
            Source::Chart => documents(&helm_template(&[])?, "helm template"),
        }
    }

    /// The object of `kind` named `name`, typed.
    pub fn object<T: serde::de::DeserializeOwned>(self, kind: &str, name: &str) -> Result<T> {
        let object = self
            .objects()?
            .into_iter()
            .find(|object| object["kind"] == kind && object["metadata"]["name"] == name)
            .with_context(|| format!("{self:?}: no {kind} {name}"))?;
        serde_json::from_value(object).with_context(|| format!("{self:?}: {kind} {name}"))
    }

    /// The RBAC objects (ServiceAccounts, Roles, ClusterRoles and their bindings), each cut to
    /// what grants rights: kind, name, namespace, rules, roleRef and subjects (labels and
    /// comments differ between the sources and grant nothing). Sorted by kind, namespace, name.
    pub fn rbac(self) -> Result<Vec<Value>> {
        const KINDS: [&str; 5] = [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ];
        let mut objects: Vec<Value> = self
            .objects()?
            .into_iter()
            .filter(|object| KINDS.iter().any(|kind| object["kind"] == *kind))
            .map(|object| {
                let mut granted = serde_json::Map::new();
                granted.insert("kind".into(), object["kind"].clone());
                granted.insert("name".into(), object["metadata"]["name"].clone());
                granted.insert("namespace".into(), object["metadata"]["namespace"].clone());
                for key in ["rules", "roleRef", "subjects"] {
                    if let Some(value) = object.get(key) {
                        granted.insert(key.into(), value.clone());
                    }
                }
                Value::Object(granted)
            })
            .collect();
        objects
            .sort_by_key(|object| ["kind", "namespace", "name"].map(|key| object[key].to_string()));
        Ok(objects)
    }
}

/// The helm binary: `NODEWRIGHT_HELM`, else `$HELM_HOME/bin/helm` of `dev/lib.sh`; an error
/// saying how to install it when it is missing.
pub fn helm() -> Result<PathBuf> {
    dev_tool("NODEWRIGHT_HELM", "HELM_HOME", "helm")
}

/// The promtool binary: `NODEWRIGHT_PROMTOOL`, else `$PROMTOOL_HOME/bin/promtool` of
/// `dev/lib.sh`; an error saying how to install it when it is missing.
pub fn promtool() -> Result<PathBuf> {
    dev_tool("NODEWRIGHT_PROMTOOL", "PROMTOOL_HOME", "promtool")
}

/// `helm template` of the chart as release `nodewright` in namespace `nodewright`, with `args`
/// added (`--set ...`); its output.
pub fn helm_template(args: &[&str]) -> Result<String> {
    let chart = repo_root().join(CHART);
    let mut all = vec![
        "template",
        RELEASE,
        chart.to_str().context("the chart's path is not UTF-8")?,
        "--namespace",
        NAMESPACE,
    ];
    all.extend_from_slice(args);
    run(Command::new(helm()?).args(&all))
}

/// The YAML documents of `text` (what `what` printed or holds), as JSON values; empty documents
/// (only comments or `---`) are dropped.
pub fn documents(text: &str, what: &str) -> Result<Vec<Value>> {
    let values: Vec<Value> =
        serde_saphyr::from_multiple(text).with_context(|| format!("{what} is not YAML"))?;
    Ok(values
        .into_iter()
        .filter(|value| !value.is_null())
        .collect())
}

/// Runs `command`; its stdout, or an error with the command, its status and stderr.
pub fn run(command: &mut Command) -> Result<String> {
    let output = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{command:?} exited {}:\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    String::from_utf8(output.stdout).with_context(|| format!("{command:?} printed non-UTF-8"))
}

/// The objects of every file `deploy/kustomization.yaml` lists under `resources`.
fn manifests() -> Result<Vec<Value>> {
    let deploy = repo_root().join("deploy");
    let kustomization = read(&deploy.join("kustomization.yaml"))?;
    let kustomization: Value =
        serde_saphyr::from_str(&kustomization).context("deploy/kustomization.yaml is not YAML")?;
    let resources = kustomization["resources"]
        .as_array()
        .context("deploy/kustomization.yaml lists no resources")?;
    let mut objects = Vec::new();
    for resource in resources {
        let file = resource
            .as_str()
            .context("a resource of deploy/kustomization.yaml is not a file name")?;
        let text = read(&deploy.join(file))?;
        objects.extend(documents(&text, &format!("deploy/{file}"))?);
    }
    Ok(objects)
}

fn read(path: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// A tool `dev/install --test-tools` builds: the path in `variable`, else
/// `$<home>/bin/<binary>` with `<home>` as `dev/lib.sh` sets it (so its versions and cache
/// directory have one source).
fn dev_tool(variable: &str, home: &str, binary: &str) -> Result<PathBuf> {
    let path = match std::env::var_os(variable) {
        Some(path) => PathBuf::from(path),
        None => {
            let lib = repo_root().join("dev").join("lib.sh");
            let script = format!("source \"$1\" && printf %s \"${home}\"");
            let home = run(Command::new("bash").args(["-c", &script, "bash"]).arg(&lib))?;
            ensure!(!home.is_empty(), "dev/lib.sh sets no {home}");
            PathBuf::from(home).join("bin").join(binary)
        }
    };
    ensure!(
        path.is_file(),
        "{binary} is missing at {}: run `dev/install --test-tools` (or set {variable} to a \
         {binary} binary)",
        path.display()
    );
    Ok(path)
}
