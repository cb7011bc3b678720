//! Persistence: the state file keeps resources across a restart.

use nodewright_sandbox::arm::EmulatorConfig;

use crate::support::*;

#[tokio::test]
async fn state_survives_a_restart_through_the_state_file() -> TestResult {
    let dir = std::env::temp_dir().join(format!("nodewright-sandbox-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("state-{}.json", rand_suffix()));
    let config = EmulatorConfig {
        state_file: Some(file.clone()),
        ..instant()
    };
    {
        let sb = Sandbox::start_with(config.clone()).await?;
        sb.create_disk("persisted").await?;
        sb.create_vm("kept", &vm_body(None, &["persisted"])).await?;
        sb.get(&vm("kept")).await?;
    }
    assert!(file.exists());
    let again = Sandbox::start_with(config).await?;
    let vm_after = again.get(&vm("kept")).await?;
    assert_eq!(vm_after.status, 200);
    assert_eq!(vm_after.state(), "Succeeded");
    let disk_after = again.get(&disk("persisted")).await?;
    assert_eq!(disk_after.body["managedBy"], vm_id("kept"));
    let _ = std::fs::remove_file(&file);
    Ok(())
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}
