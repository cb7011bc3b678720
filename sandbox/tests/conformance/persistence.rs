//! Persistence: the state file keeps resources, and operations in flight, across a restart.

use nodewright_sandbox::arm::{EmulatorConfig, FaultKind, FaultRule};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn state_survives_a_restart_through_the_state_file() -> TestResult {
    let file = state_file()?;
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

#[tokio::test]
async fn an_operation_held_at_a_restart_completes_even_when_a_new_rule_reuses_its_rule_id()
-> TestResult {
    let file = state_file()?;
    let config = EmulatorConfig {
        state_file: Some(file.clone()),
        ..instant()
    };
    let (old_base, location) = {
        let sb = Sandbox::start_with(config.clone()).await?;
        sb.create_disk("held").await?;
        sb.create_vm("hv", &vm_body(None, &["held"])).await?;
        let rule = sb
            .post("/sandbox/faults", &json!({"kind": "hang_detach"}))
            .await?;
        assert_eq!(rule.body["id"], 1);
        let detach = json!({"dataDisksToDetach": [{"diskId": disk_id("held")}]});
        let resp = sb
            .post(
                &format!("{}/attachDetachDataDisks?api-version={VM_API}", vm_id("hv")),
                &detach,
            )
            .await?;
        assert_eq!(resp.status, 202);
        let location = resp.header("location").ok_or("no Location")?.to_owned();
        assert_eq!(sb.get(&location).await?.status, 202, "held by the rule");
        (sb.base.clone(), location)
    };
    // The restarted emulator's config has an unrelated rule, which gets id 1 again.
    let mut unrelated = FaultRule::new(FaultKind::Throttle);
    unrelated.operation = Some("nic.list".into());
    let again = Sandbox::start_with(EmulatorConfig {
        faults: vec![unrelated],
        ..config
    })
    .await?;
    let location = location.replacen(&old_base, &again.base, 1);
    assert_eq!(
        again.get(&location).await?.status,
        200,
        "the detach finished"
    );
    assert_eq!(
        again.get(&disk("held")).await?.body["properties"]["diskState"],
        "Unattached"
    );
    let patch = again.patch(&vm("hv"), &json!({"tags": {"a": "b"}})).await?;
    assert_eq!(patch.status, 200, "the VM is no longer busy: {patch:?}");
    let _ = std::fs::remove_file(&file);
    Ok(())
}

pub(crate) fn state_file() -> Res<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("nodewright-sandbox-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir.join(format!("state-{}.json", rand_suffix())))
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}
