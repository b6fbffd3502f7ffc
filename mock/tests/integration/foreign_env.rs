//! `AM_MOCK_FOREIGN_FIRMWARE=1`: process-wide PF devices start as `amdgpu` leaves them. The
//! environment is process-wide, so the test re-runs itself in a child process with the
//! variable set rather than changing its own.

const TEST: &str = "foreign_env::registry_pfs_start_with_foreign_firmware_when_the_variable_is_set";

#[test]
fn registry_pfs_start_with_foreign_firmware_when_the_variable_is_set() {
    if std::env::var(am_mock::FOREIGN_FIRMWARE_ENV).is_err() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([TEST, "--exact", "--test-threads=1"])
            .env(am_mock::FOREIGN_FIRMWARE_ENV, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(
            stdout.contains("1 passed"),
            "the child ran the test: {stdout}"
        );
        return;
    }
    let member = am_mock::gpu("mi300x-hive4", 0).unwrap();
    assert!(member.with_psp(|p| p.sos_alive()));
    assert!(member.with_smu(|s| s.alive()));
    assert!(
        member.with_psp(|p| p.log().is_empty()),
        "loaded by another driver, not through this model"
    );
    // A VF's PSP and SMU are its host's: nothing to start.
    let vf = am_mock::gpu("mi350x-vf", 0).unwrap();
    assert!(!vf.with_psp(|p| p.sos_alive()));
    // Devices built outside the registry are not affected.
    let fresh = am_mock::MockGpu::new("mi300x").unwrap();
    assert!(!fresh.with_psp(|p| p.sos_alive()));
}
