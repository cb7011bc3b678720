//! The Temporal UI in a real browser: headless Chromium (Debian's `chromium`, installed by
//! `dev/install --test-tools`) loads the local stack's UI, lists the runs of a fresh test pool
//! filtered by `NodewrightPool`, opens the CreateMachine run, and the test asserts on the rendered page and
//! saves screenshots to `target/e2e-screenshots/` (`list-<pool>.png`, `run-<machine>.png`,
//! `metadata-<machine>.png`) with the pages' text next to them (`.txt`). A create that ARM
//! refuses (AllocationFailed, injected in the sandbox) is listed among the pool's failed runs, and
//! its page says the step, ARM's code and message, and what was removed (`failed-run-<machine>`).
//!
//! The browser runs as a plain process, with no driver: `--dump-dom` prints the DOM after the
//! single-page app has rendered (`--virtual-time-budget` lets its API calls finish first), and
//! `--screenshot` saves a PNG of the same URL.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use nodewright_tests::Stack;
use nodewright_tests::kube_objects::unique_suffix;
use nodewright_tests::machines::{
    CliResult, KillableWorker, Sandbox, allocation_failure, create_machine, write_pool_file,
};
use nodewright_tests::stack::repo_root;
use nodewright_tests::temporal_worker::unique_task_queue;

/// Where Debian's `chromium` package puts the browser; `NODEWRIGHT_CHROMIUM` overrides it.
const CHROMIUM: &str = "/usr/bin/chromium";

/// The activities of a successful CreateMachine run, as the UI names them.
const CREATE_ACTIVITIES: [&str; 6] = [
    "azure.ensure_nic",
    "azure.begin_vm_create",
    "azure.await_vm",
    "kube.await_node_registered",
    "kube.apply_node_metadata",
    "kube.await_node_ready",
];

#[tokio::test]
async fn the_temporal_ui_lists_a_pools_runs_and_shows_a_create_run_readably() -> Result<()> {
    let browser = Browser::find()?;
    let stack = Stack::load()?;
    let ui = temporal_ui_url()?;
    let task_queue = unique_task_queue("ui");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("ui{}", unique_suffix());
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-u1b2c");

    create_machine(
        &stack,
        &task_queue,
        &pool_file,
        &machine,
        &["--wait", "--output", "json"],
    )?
    .expect_code(0)
    .with_context(|| worker.log_tail())?;

    let checked = check_ui(&browser, &stack, &ui, &pool, &machine).await;

    let deleted = CliResult::run(
        &stack,
        &task_queue,
        &["machine", "delete", &machine, "--wait"],
    )?;
    deleted.expect_code(0).with_context(|| worker.log_tail())?;
    checked
}

#[tokio::test]
async fn the_temporal_ui_shows_a_failed_create_with_the_arm_error_and_the_clean_up() -> Result<()> {
    let browser = Browser::find()?;
    let stack = Stack::load()?;
    let ui = temporal_ui_url()?;
    let sandbox = Sandbox::new(&stack)?;
    let task_queue = unique_task_queue("uifail");
    let worker = KillableWorker::start(&stack, &task_queue)?;
    let pool = format!("uf{}", unique_suffix());
    let pool_file = write_pool_file(&stack, &pool, "5m")?;
    let machine = format!("{pool}-f9k2m");
    let rule = sandbox.add_fault(allocation_failure(&pool)).await?;
    let created = create_machine(&stack, &task_queue, &pool_file, &machine, &["--wait"]);
    sandbox.remove_fault(rule).await?;
    created?.expect_code(3).with_context(|| worker.log_tail())?;
    check_failed_ui(&browser, &stack, &ui, &pool, &machine).await
}

/// Opens the pool's failed runs and the failed create run in the browser: the failure names the
/// step, the ARM error code and message, and what was cleaned up.
async fn check_failed_ui(
    browser: &Browser,
    stack: &Stack,
    ui: &str,
    pool: &str,
    machine: &str,
) -> Result<()> {
    let query = format!("NodewrightPool=\"{pool}\" AND ExecutionStatus=\"Failed\"");
    let CreateRunPages {
        workflow_id,
        list_url,
        run_url,
        dir,
        ..
    } = CreateRunPages::new(stack, ui, machine, &query).await?;
    browser
        .checked_text(
            "the pool's failed runs",
            &list_url,
            &workflow_id,
            &dir.join(format!("failed-list-{pool}.txt")),
            &[&workflow_id, "CreateMachine", "Failed", "1–1 of 1"],
        )
        .await?;

    let step = format!("creating machine {machine} failed at step provision-vm");
    browser
        .checked_text(
            "the failed run's page",
            &run_url,
            "AllocationFailed",
            &dir.join(format!("failed-run-{machine}.txt")),
            &[
                &step,
                "AllocationFailed: Allocation failed. We do not have sufficient capacity",
                "removed the VM (with its NIC and OS disk)",
                "Failed",
                // The failed step, then the clean-up, by activity name.
                "azure.await_vm",
                "azure.begin_vm_delete",
                "azure.await_vm_deletion",
                "azure.find_leftovers",
                "kube.delete_node",
            ],
        )
        .await?;
    browser
        .save_screenshot(
            &run_url,
            &dir.join(format!("failed-run-{machine}.png")),
            "1600,1120",
        )
        .await
}

/// Opens the pool's list and the create run in the browser, asserts on both, saves screenshots.
async fn check_ui(
    browser: &Browser,
    stack: &Stack,
    ui: &str,
    pool: &str,
    machine: &str,
) -> Result<()> {
    // (a) The namespace's workflows filtered by the pool: exactly this machine's create run.
    let query = format!("NodewrightPool=\"{pool}\"");
    let CreateRunPages {
        workflow_id,
        run_id,
        list_url,
        run_url,
        dir,
    } = CreateRunPages::new(stack, ui, machine, &query).await?;
    browser
        .checked_text(
            "the pool's list",
            &list_url,
            &workflow_id,
            &dir.join(format!("list-{pool}.txt")),
            &[
                &workflow_id,
                &run_id,
                "CreateMachine",
                "Completed",
                // The pagination line: the filter left exactly one run.
                "1–1 of 1",
            ],
        )
        .await?;
    browser
        .save_screenshot(
            &list_url,
            &dir.join(format!("list-{pool}.png")),
            "1600,1000",
        )
        .await?;

    // (b) The run's page: identity, the summary, every step by its activity name.
    // The summary the CLI set; this UI shows it on the WorkflowExecutionStarted event.
    let summary = format!("Summary Create machine {machine} of pool {pool}");
    let mut expected = vec![
        workflow_id.as_str(),
        run_id.as_str(),
        "CreateMachine",
        "Completed",
        summary.as_str(),
    ];
    expected.extend(CREATE_ACTIVITIES);
    browser
        .checked_text(
            "the run's page",
            &run_url,
            "kube.await_node_ready",
            &dir.join(format!("run-{machine}.txt")),
            &expected,
        )
        .await?;
    browser
        .save_screenshot(
            &run_url,
            &dir.join(format!("run-{machine}.png")),
            "1600,1120",
        )
        .await?;

    // (c) The run's User Metadata tab: the summary on its own. The UI renders it as markdown in
    // an iframe (`/render?content=<summary>`), outside the dumped DOM's text: assert on the
    // iframe's source; the screenshot shows the rendered line.
    let metadata_url = run_url.replace("/history", "/user-metadata");
    let rendered = format!(
        "/render?content={}",
        encode(&format!("Create machine {machine} of pool {pool}"))
    );
    let metadata = browser
        .dom_showing(&metadata_url, &rendered)
        .await
        .context("the run's User Metadata tab")?;
    let metadata = visible_text(&metadata);
    ensure_shows(
        "the User Metadata tab",
        &metadata_url,
        &metadata,
        &[&workflow_id, "Summary", "Current Details"],
    )?;
    browser
        .save_screenshot(
            &metadata_url,
            &dir.join(format!("metadata-{machine}.png")),
            "1600,1000",
        )
        .await
}

/// A create run's pages in the Temporal UI, and where their screenshots and texts go.
pub(crate) struct CreateRunPages {
    pub(crate) workflow_id: String,
    pub(crate) run_id: String,
    /// The namespace's runs filtered by a visibility query.
    pub(crate) list_url: String,
    /// The run's history page.
    pub(crate) run_url: String,
    /// Where screenshots and page texts go.
    pub(crate) dir: PathBuf,
}

impl CreateRunPages {
    /// The pages of the latest create run of `machine`, the list filtered by `query`.
    pub(crate) async fn new(stack: &Stack, ui: &str, machine: &str, query: &str) -> Result<Self> {
        let workflow_id = format!("create/{}/{machine}", stack.cluster);
        let run_id = run_id(stack, &workflow_id).await?;
        let namespace = &stack.temporal_namespace;
        let dir = repo_root().join("target").join("e2e-screenshots");
        std::fs::create_dir_all(&dir)?;
        Ok(Self {
            list_url: format!(
                "{ui}/namespaces/{namespace}/workflows?query={}",
                encode(query)
            ),
            run_url: format!(
                "{ui}/namespaces/{namespace}/workflows/{}/{run_id}/history",
                encode(&workflow_id)
            ),
            workflow_id,
            run_id,
            dir,
        })
    }
}

/// Fails unless `text`, the visible text of `page` at `url`, shows every one of `expected`.
pub(crate) fn ensure_shows(page: &str, url: &str, text: &str, expected: &[&str]) -> Result<()> {
    for expected in expected {
        ensure!(
            text.contains(expected),
            "{page} at {url} does not show {expected:?}; its text: {}",
            excerpt(text)
        );
    }
    Ok(())
}

/// Headless Chromium, one process per page, each with a fresh profile.
pub(crate) struct Browser {
    path: PathBuf,
    profiles: PathBuf,
}

impl Browser {
    /// The installed browser, or an error saying how to install it.
    pub(crate) fn find() -> Result<Self> {
        let path = std::env::var_os("NODEWRIGHT_CHROMIUM")
            .map_or_else(|| PathBuf::from(CHROMIUM), PathBuf::from);
        if !path.is_file() {
            bail!(
                "{} is missing: run `dev/install --test-tools`, which installs Debian's chromium \
                 package (or `apt-get install -y chromium`)",
                path.display()
            );
        }
        let profiles = repo_root().join("target").join("e2e-chromium");
        Ok(Self { path, profiles })
    }

    /// Loads `url` until it shows `ready`, saves its text to `saved_as` and checks that it shows
    /// each of `expected`; `page` names it in errors.
    pub(crate) async fn checked_text(
        &self,
        page: &str,
        url: &str,
        ready: &str,
        saved_as: &Path,
        expected: &[&str],
    ) -> Result<()> {
        let text = self
            .text_showing(url, ready)
            .await
            .with_context(|| page.to_owned())?;
        std::fs::write(saved_as, &text)?;
        ensure_shows(page, url, &text, expected)
    }

    /// Saves a PNG of `url` rendered in a `window_size` ("width,height") window to `png` and
    /// prints where it is.
    pub(crate) async fn save_screenshot(
        &self,
        url: &str,
        png: &Path,
        window_size: &str,
    ) -> Result<()> {
        let _ = std::fs::remove_file(png);
        let screenshot = format!("--screenshot={}", png.display());
        let window = format!("--window-size={window_size}");
        self.run(&[&screenshot, &window, "--hide-scrollbars", url])
            .await?;
        ensure!(png.is_file(), "chromium saved no screenshot of {url}");
        println!("screenshot of {url}: {}", png.display());
        Ok(())
    }

    /// The visible text of `url` once it contains `expected`: see [`Self::showing`].
    pub(crate) async fn text_showing(&self, url: &str, expected: &str) -> Result<String> {
        self.showing(url, expected, visible_text).await
    }

    /// The DOM of `url` (its markup) once it contains `expected`: see [`Self::showing`].
    pub(crate) async fn dom_showing(&self, url: &str, expected: &str) -> Result<String> {
        self.showing(url, expected, str::to_owned).await
    }

    /// `view` of the DOM of `url` once the app has rendered it and the view contains `expected`,
    /// loading the page again every 2 seconds (the list waits for visibility, the run's page for
    /// its history) for up to a minute.
    async fn showing(&self, url: &str, expected: &str, view: fn(&str) -> String) -> Result<String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let seen = view(&self.run(&["--dump-dom", url]).await?);
            if seen.contains(expected) {
                return Ok(seen);
            }
            if Instant::now() >= deadline {
                bail!(
                    "{url} did not show {expected:?} within a minute; its text: {}",
                    excerpt(&visible_text(&seen))
                );
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    /// Runs the browser headless with `args` and returns its standard output. Its output goes to
    /// files (a pipe nobody reads while it runs would fill and stall it); after two minutes its
    /// whole process group is killed.
    pub(crate) async fn run(&self, args: &[&str]) -> Result<String> {
        let profile = self.profiles.join(unique_suffix());
        std::fs::create_dir_all(&profile)?;
        let (stdout, stderr) = (profile.join("stdout"), profile.join("stderr"));
        let mut command = Command::new(&self.path);
        command
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--virtual-time-budget=15000",
            ])
            .arg(format!(
                "--user-data-dir={}",
                profile.join("data").display()
            ))
            .args(args)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout)?)
            .stderr(std::fs::File::create(&stderr)?);
        let described = format!("chromium {}", args.join(" "));
        let status = tokio::task::spawn_blocking(move || -> Result<_> {
            let mut child = command.spawn()?;
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                if let Some(status) = child.try_wait()? {
                    return Ok(status);
                }
                if Instant::now() >= deadline {
                    let group = format!("-{}", child.id());
                    let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
                    let _ = child.wait();
                    bail!("still running after 2 minutes; killed");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
        .await?
        .with_context(|| described.clone());
        let read = |path: &Path| {
            String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
        };
        let (out, err) = (read(&stdout), read(&stderr));
        let _ = std::fs::remove_dir_all(&profile);
        let status = status?;
        ensure!(status.success(), "{described} exited {status}: {err}");
        Ok(out)
    }
}

/// The run id of the latest run of `workflow_id`, from `temporal workflow describe`.
async fn run_id(stack: &Stack, workflow_id: &str) -> Result<String> {
    let described = nodewright_tests::stack::describe_workflow(stack, workflow_id).await?;
    described["workflowExecutionInfo"]["execution"]["runId"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no run id in {described}"))
}

/// The Temporal UI's base URL: `NODEWRIGHT_TEMPORAL_UI` from the environment or the stack's env
/// file.
fn temporal_ui_url() -> Result<String> {
    if let Ok(url) = std::env::var("NODEWRIGHT_TEMPORAL_UI") {
        return Ok(url.trim_end_matches('/').to_owned());
    }
    let run_dir = std::env::var_os("NODEWRIGHT_RUN_DIR")
        .map_or_else(|| repo_root().join(".run"), PathBuf::from);
    let text = std::fs::read_to_string(run_dir.join("env"))?;
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("NODEWRIGHT_TEMPORAL_UI="))
        .map(|url| url.trim().trim_end_matches('/').to_owned())
        .next()
        .context(
            "NODEWRIGHT_TEMPORAL_UI is not in the stack's env file: start it with `dev/stack up`",
        )
}

/// `value` percent-encoded for a URL path segment or query value.
pub(crate) fn encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// The text a reader sees in `html`: scripts, styles and tags dropped, entities decoded,
/// whitespace collapsed to single spaces.
pub(crate) fn visible_text(html: &str) -> String {
    let mut text = String::with_capacity(html.len() / 4);
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        text.push_str(&rest[..start]);
        text.push(' ');
        let tag = &rest[start..];
        let skipped_to = ["script", "style"]
            .iter()
            .find(|name| {
                tag.get(1..=name.len())
                    .is_some_and(|t| t.eq_ignore_ascii_case(name))
            })
            .and_then(|name| {
                tag.find(&format!("</{name}>"))
                    .map(|end| end + name.len() + 3)
            });
        let end = skipped_to.or_else(|| tag.find('>').map(|end| end + 1));
        rest = end.map_or("", |end| &tag[end..]);
    }
    text.push_str(rest);
    let decoded = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x2F;", "/")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    decoded.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Up to 4000 characters of `text` after the UI's navigation and its time zone list (which end
/// with the theme menu's "System Default"), for failure messages.
pub(crate) fn excerpt(text: &str) -> String {
    let from = text.find("System Default").unwrap_or(0);
    text[from..].chars().take(4000).collect()
}
