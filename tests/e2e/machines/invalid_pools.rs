//! Every validation rule of the pool file, through the CLI: exit code 2, the field named in the
//! message, nothing started. One test per rule, from `tests/fixtures/invalid-pools/<rule>.yaml`
//! (each file's first line says `# expect: <text the message must contain>`).

use anyhow::{Context, Result, ensure};
use nodewright_tests::Stack;
use nodewright_tests::machines::{CliResult, repo_path};

/// Runs `machine create` on the fixture and checks the refusal.
fn refused(rule: &str) -> Result<()> {
    let stack = Stack::load()?;
    let path = repo_path(&format!("tests/fixtures/invalid-pools/{rule}.yaml"));
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let expect = text
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("# expect:"))
        .map(str::trim)
        .with_context(|| format!("{} has no `# expect:` first line", path.display()))?;
    // A task queue no worker polls, and a Temporal address nothing listens on: if the CLI
    // started anything, it would fail differently (exit 4), not with 2.
    let mut stack = stack;
    stack.temporal_address = "127.0.0.1:1".to_owned();
    let result = CliResult::run(
        &stack,
        "nobody-polls-this",
        &["machine", "create", "--pool", &path.to_string_lossy()],
    )?;
    result.expect_code(2)?;
    ensure!(
        result.stderr.contains(expect),
        "{rule}: the message names {expect:?}: {}",
        result.stderr
    );
    Ok(())
}

macro_rules! invalid_pool_tests {
    ($($rule:ident),* $(,)?) => {
        $(
            #[test]
            fn $rule() -> Result<()> {
                refused(&stringify!($rule).replace('_', "-"))
            }
        )*

        /// Every fixture has its test, and every test its fixture.
        #[test]
        fn every_fixture_has_a_test() -> Result<()> {
            let dir = repo_path("tests/fixtures/invalid-pools");
            let mut files: Vec<String> = std::fs::read_dir(&dir)?
                .filter_map(|entry| entry.ok())
                .filter_map(|entry| entry.file_name().to_str().and_then(|n| n.strip_suffix(".yaml")).map(str::to_owned))
                .collect();
            files.sort();
            let mut tests: Vec<String> = vec![$(stringify!($rule).replace('_', "-")),*];
            tests.sort();
            ensure!(files == tests, "fixtures {files:?} vs tests {tests:?}");
            Ok(())
        }
    };
}

invalid_pool_tests!(
    admin_username_reserved,
    admin_username_syntax,
    api_version,
    bootstrap_key_vault_secret_both,
    bootstrap_key_vault_secret_uri,
    bootstrap_secret_ref_both,
    bootstrap_secret_ref_name,
    bootstrap_size,
    bootstrap_token_extra_group,
    bootstrap_token_placeholder,
    bootstrap_token_ttl_creation,
    drain_force_after_unhealthy,
    drain_local_data,
    drain_pdb_retry_interval,
    drain_timeout,
    drain_volume_attach_timeout,
    drain_volume_detach_timeout,
    image_both,
    image_id_format,
    image_marketplace_incomplete,
    image_none,
    kind,
    label_control_plane_role,
    label_instance_type,
    label_key_syntax,
    label_master_role,
    label_reserved_kubernetes,
    label_reserved_nodewright,
    label_value_syntax,
    max_failures,
    max_surge_format,
    max_unavailable_negative,
    missing_field,
    offerings_unavailable_for,
    os_disk_size,
    os_disk_type_data_only,
    os_disk_type,
    pool_name_length,
    pool_name_syntax,
    progress_deadline,
    replicas_max,
    scheduled_events_ignore_below,
    ssh_public_key_format,
    ssh_public_key_missing,
    spot_max_price,
    spot_without_spot,
    os_disk_premium_size,
    strategy_both_zero,
    subnet_id_format,
    tag_case_duplicate,
    tag_count,
    tag_name_characters,
    tag_name_length,
    tag_reserved,
    tag_value_length,
    taint_duplicate,
    taint_effect,
    taint_key_syntax,
    taint_reserved,
    taint_value_syntax,
    timeouts_creation,
    timeouts_health,
    unknown_field,
    vm_size_format,
    zone_duplicate,
    zone_value,
);
