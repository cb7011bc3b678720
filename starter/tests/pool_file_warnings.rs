//! The commands that read a pool file without starting a run of it, `pool validate` and
//! `preflight --pool`, warn like `machine create` when the inline bootstrap looks like it holds a
//! credential, and never print the text. Runs the built binary; needs no stack (`preflight` is
//! pointed at a port nothing listens on, so it stops after checking the file).

use std::path::PathBuf;
use std::process::{Command, Output};

/// A join token's form, written nowhere else: what must never be printed.
const TOKEN: &str = "q7x2kd.9fz81mw0c3ab5yte";

const WARNING: &str = "spec.template.bootstrap looks like it holds a Kubernetes bootstrap token";

/// A pool file in a fresh directory of `target/`, its inline bootstrap joining with [`TOKEN`]
/// when `with_token`.
fn pool_file(name: &str, with_token: bool) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pool-file-warnings");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let join = if with_token {
        format!("kubeadm join 10.0.0.4:6443 --token {TOKEN}")
    } else {
        "exec /usr/bin/kubelet".to_owned()
    };
    let text = format!(
        "apiVersion: nodewright.io/v1alpha1\nkind: Pool\nmetadata:\n  name: {name}\nspec:\n  replicas: 2\n  template:\n    vmSize: Standard_D2s_v5\n    image: {{ publisher: Canonical, offer: ubuntu-24_04-lts, sku: server, version: latest }}\n    subnetId: /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/r/providers/Microsoft.Network/virtualNetworks/v/subnets/n\n    sshPublicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@example.com\n    bootstrap: |\n      #!/bin/bash\n      {join}\n"
    );
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, text).expect("writing the pool file");
    path
}

/// `nodewright ARGS`, with Temporal at a port nothing listens on and no config file.
fn nodewright(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .env("TEMPORAL_ADDRESS", "127.0.0.1:1")
        .env("NODEWRIGHT_CLUSTER", "test")
        .env_remove("NODEWRIGHT_CONFIG")
        .env_remove("NODEWRIGHT_ENCRYPTION_KEYS")
        .env_remove("NODEWRIGHT_ENCRYPTION_KEYS_FILE")
        .output()
        .expect("running nodewright")
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn pool_validate_warns_about_an_inline_token_without_printing_it() {
    let path = pool_file("tokened", true);
    let output = nodewright(&["pool", "validate", "--pool", &path.to_string_lossy()]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("is valid: pool tokened, 2 replicas"),
        "{stdout}"
    );
    assert!(stderr.contains(WARNING), "{stderr}");
    assert!(
        !stdout.contains(TOKEN) && !stderr.contains(TOKEN),
        "printed the token: {stdout}{stderr}"
    );

    let json = nodewright(&[
        "--output",
        "json",
        "pool",
        "validate",
        "--pool",
        &path.to_string_lossy(),
    ]);
    let (stdout, stderr) = text(&json);
    let document: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert!(
        document["credentialWarning"]
            .as_str()
            .is_some_and(|w| w.starts_with(WARNING)),
        "{document}"
    );
    assert!(!stdout.contains(TOKEN) && !stderr.contains(TOKEN));

    let plain = nodewright(&[
        "pool",
        "validate",
        "--pool",
        &pool_file("plain", false).to_string_lossy(),
    ]);
    let (stdout, stderr) = text(&plain);
    assert_eq!(plain.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn preflight_checks_its_pool_files_first_and_warns_without_printing_the_token() {
    let path = pool_file("preflighted", true);
    let output = nodewright(&["preflight", "--pool", &path.to_string_lossy()]);
    let (stdout, stderr) = text(&output);
    // The file is read and warned about, then Temporal is not there (exit 4).
    assert_eq!(output.status.code(), Some(4), "{stdout}{stderr}");
    assert!(stderr.contains(WARNING), "{stderr}");
    assert!(
        !stdout.contains(TOKEN) && !stderr.contains(TOKEN),
        "printed the token: {stdout}{stderr}"
    );

    let missing = nodewright(&["preflight", "--pool", "/nonexistent/pool.yaml"]);
    let (_, stderr) = text(&missing);
    assert_eq!(missing.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot read pool file /nonexistent/pool.yaml"),
        "{stderr}"
    );
}
