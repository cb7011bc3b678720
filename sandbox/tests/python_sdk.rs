//! The emulator driven by the official Azure SDK for Python (`azure-mgmt-compute` 39,
//! `azure-mgmt-network` 33.1, pinned in `sandbox/tests/sdk/requirements.txt`), with the SDKs'
//! default api-versions and their own long-running-operation polling: runs the `unittest` suite
//! in `sandbox/tests/sdk/` against an emulator started here.
//!
//! The SDKs live in a virtual environment `dev/install --test-tools` makes (its path:
//! `AZURE_SDK_PYTHON_HOME` in `dev/lib.sh`, or the `NODEWRIGHT_AZURE_SDK_PYTHON` interpreter).
//! Without it this test fails, saying how to make it: it never passes without running the SDK.

use std::path::{Path, PathBuf};
use std::process::Command;

use nodewright_sandbox::arm::{Emulator, EmulatorConfig, LatencyProfile, app};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The bearer token the emulator requires of the SDK.
const TOKEN: &str = "sdk-conformance-token";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// The virtual environment's interpreter: `NODEWRIGHT_AZURE_SDK_PYTHON`, else the one
/// `dev/install --test-tools` made where `dev/lib.sh` says.
fn sdk_python() -> Result<PathBuf, String> {
    if let Some(python) = std::env::var_os("NODEWRIGHT_AZURE_SDK_PYTHON") {
        return Ok(PathBuf::from(python));
    }
    let root = repo_root();
    let lib = root.join("dev/lib.sh");
    let output = Command::new("bash")
        .arg("-c")
        .arg(r#"source "$1" && printf %s "$AZURE_SDK_PYTHON_HOME""#)
        .arg("bash")
        .arg(&lib)
        .output()
        .map_err(|e| format!("running bash to read {}: {e}", lib.display()))?;
    let home = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() || home.is_empty() {
        return Err(format!(
            "dev/lib.sh names no AZURE_SDK_PYTHON_HOME: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let python = Path::new(&home).join("venv/bin/python");
    if Path::new(&home).join(".installed").is_file() && python.exists() {
        Ok(python)
    } else {
        Err(format!(
            "the Azure SDK for Python is not installed in {home}: run `dev/install --test-tools` \
             (it makes that virtual environment from sandbox/tests/sdk/requirements.txt), or set \
             NODEWRIGHT_AZURE_SDK_PYTHON to a python with those packages"
        ))
    }
}

/// How many tests the suite's `test_*.py` files define (`def test_…` methods).
fn written_tests(suite: &Path) -> std::io::Result<usize> {
    let mut count = 0;
    for entry in std::fs::read_dir(suite)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with("test_") && name.ends_with(".py") {
            count += std::fs::read_to_string(&path)?
                .lines()
                .filter(|line| line.trim_start().starts_with("def test_"))
                .count();
        }
    }
    Ok(count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_drives_the_emulator() -> TestResult {
    let python = sdk_python()?;
    let emulator = Emulator::new(EmulatorConfig {
        latency: LatencyProfile::Instant,
        // Small pages, so that every list the SDK follows has several.
        page_size: 3,
        token: Some(TOKEN.to_owned()),
        ..EmulatorConfig::default()
    })?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let router = app(emulator);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });

    let suite = repo_root().join("sandbox/tests/sdk");
    let written = written_tests(&suite)?;
    let output = tokio::task::spawn_blocking(move || {
        Command::new(&python)
            .args([
                "-m",
                "unittest",
                "discover",
                "--verbose",
                "--start-directory",
            ])
            .arg(&suite)
            .arg("--top-level-directory")
            .arg(&suite)
            .env("SANDBOX_ENDPOINT", &endpoint)
            .env("SANDBOX_TOKEN", TOKEN)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
    })
    .await??;
    // unittest reports on stderr.
    let report = String::from_utf8_lossy(&output.stderr);
    println!("{}", String::from_utf8_lossy(&output.stdout));
    println!("{report}");
    assert!(
        output.status.success(),
        "the Python SDK suite failed (above)"
    );
    let ran = report
        .lines()
        .find_map(|line| {
            line.strip_prefix("Ran ")?
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .unwrap_or(0);
    assert_eq!(
        ran, written,
        "the Python SDK suite ran {ran} tests, but {written} are written in sandbox/tests/sdk"
    );
    assert!(
        !report.contains("skipped"),
        "no SDK test may be skipped:\n{report}"
    );
    Ok(())
}
