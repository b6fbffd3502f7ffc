//! End-to-end: the built `am fw` on Debian's firmware and on synthetic sets.

// Tests may unwrap: a panic is the failure report.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("am-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `am` with the firmware environment cleared (or set to `firmware_path`).
fn am(args: &[&str], firmware_path: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_am"));
    cmd.args(args)
        .env_remove("AM_FIRMWARE_PATH")
        .env_remove("AM_FIRMWARE_PINS");
    if let Some(p) = firmware_path {
        cmd.env("AM_FIRMWARE_PATH", p);
    }
    cmd.output().unwrap()
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "am failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn assert_all_found_with_versions(v: &Value, expected_files: &[&str]) {
    let files = v["files"].as_array().unwrap();
    let names: Vec<&str> = files.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, expected_files);
    for f in files {
        assert_eq!(f["status"], "found", "{f}");
        let header = f["header_version"].as_str().unwrap();
        assert!(header.contains('.'), "{f}");
        assert!(f["ucode_version"].is_u64(), "{f}");
        assert!(f["size"].as_u64().unwrap() > 0, "{f}");
        assert_eq!(f["sha256"].as_str().unwrap().len(), 64, "{f}");
    }
    assert_eq!(v["complete"], true);
}

fn step_names(v: &Value) -> Vec<String> {
    v["psp_load_order"]
        .as_array()
        .unwrap_or_else(|| panic!("no load order: {}", v["psp_load_order_error"]))
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

/// The RDNA4 parts: Debian's `psp_14_0_x`, `smu_14_0_x`, `sdma_7_0_x` and `gc_12_0_x` files,
/// PFP and ME included (GC 12), and a load order that ends in RLC autoload without SETUP_TMR
/// (PSP 14 sets the TMR up at boot).
#[test]
fn fw_list_rdna4_json_finds_the_debian_gc12_set() {
    for (profile, gc, mp, sdma) in [
        ("navi48", "12_0_1", "14_0_3", "7_0_1"),
        ("navi44", "12_0_0", "14_0_2", "7_0_0"),
    ] {
        let v = json_of(&am(&["fw", "list", "--profile", profile, "--json"], None));
        assert_eq!(v["ip_versions"]["gc"], gc.replace('_', "."), "{profile}");
        assert_all_found_with_versions(
            &v,
            &[
                &format!("psp_{mp}_sos.bin"),
                &format!("smu_{mp}.bin"),
                &format!("sdma_{sdma}.bin"),
                &format!("gc_{gc}_pfp.bin"),
                &format!("gc_{gc}_me.bin"),
                &format!("gc_{gc}_mec.bin"),
                &format!("gc_{gc}_imu.bin"),
                &format!("gc_{gc}_rlc.bin"),
            ],
        );
        let steps = step_names(&v);
        assert_eq!(
            steps.last().unwrap(),
            "GFX_CMD_ID_AUTOLOAD_RLC",
            "{profile}"
        );
        assert!(
            !steps.iter().any(|s| s == "GFX_CMD_ID_SETUP_TMR"),
            "{profile}: {steps:?}"
        );
    }
}

#[test]
fn fw_list_navi31_json_finds_the_debian_set_with_versions_and_load_order() {
    let v = json_of(&am(&["fw", "list", "--profile", "navi31", "--json"], None));
    assert_eq!(v["ip_versions"]["gc"], "11.0.0");
    assert_all_found_with_versions(
        &v,
        &[
            "psp_13_0_0_sos.bin",
            "smu_13_0_0.bin",
            "sdma_6_0_0.bin",
            "gc_11_0_0_mec.bin",
            "gc_11_0_0_imu.bin",
            "gc_11_0_0_rlc.bin",
        ],
    );
    for f in v["files"].as_array().unwrap() {
        assert!(
            f["path"]
                .as_str()
                .unwrap()
                .starts_with("/lib/firmware/amdgpu/"),
            "{f}"
        );
    }
    let steps = step_names(&v);
    assert_eq!(steps.first().unwrap(), "PSP_BL__LOAD_KEY_DATABASE");
    assert_eq!(steps.last().unwrap(), "GFX_CMD_ID_AUTOLOAD_RLC");
    assert_eq!(steps.len(), 19);
    assert!(v["ucode_start"]["MEC"].as_u64().unwrap() > 0);
}

#[test]
fn fw_list_mi300x_json_finds_the_debian_set_with_versions_and_load_order() {
    let v = json_of(&am(&["fw", "list", "--profile", "mi300x", "--json"], None));
    assert_all_found_with_versions(
        &v,
        &[
            "psp_13_0_6_sos.bin",
            "smu_13_0_6.bin",
            "sdma_4_4_2.bin",
            "gc_9_4_3_mec.bin",
            "gc_9_4_3_rlc.bin",
        ],
    );
    let steps = step_names(&v);
    assert_eq!(steps.first().unwrap(), "PSP_BL__LOAD_KEY_DATABASE");
    assert_eq!(steps.last().unwrap(), "GFX_FW_TYPE_REG_LIST");
    let p2s = &v["psp_load_order"][9];
    assert_eq!(p2s["name"], "GFX_FW_TYPE_P2S_TABLE");
    assert_eq!(p2s["fw_type"], 129);
    assert_eq!(p2s["file"], "smu_13_0_6.bin");
}

#[test]
fn fw_synth_then_list_mi350x_finds_every_file_in_the_synthetic_directory() {
    let dir = TempDir::new("mi350x");
    let out = am(
        &[
            "fw",
            "synth",
            "--profile",
            "mi350x",
            dir.0.to_str().unwrap(),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&am(
        &["fw", "list", "--profile", "mi350x", "--json", "--strict"],
        Some(&dir.0),
    ));
    assert_all_found_with_versions(
        &v,
        &[
            "psp_13_0_14_sos.bin",
            "smu_13_0_14.bin",
            "sdma_4_4_5.bin",
            "gc_9_5_0_mec.bin",
            "gc_9_5_0_rlc.bin",
        ],
    );
    for f in v["files"].as_array().unwrap() {
        assert!(
            Path::new(f["path"].as_str().unwrap()).starts_with(&dir.0),
            "{f}"
        );
    }
    assert_eq!(step_names(&v).len(), 21);
}

#[test]
fn fw_list_strict_fails_only_when_asked_and_files_are_missing() {
    // No directory has GC 9.5.0 firmware: Debian ships none.
    let empty = TempDir::new("empty");
    let relaxed = am(
        &["fw", "list", "--profile", "mi350x", "--json"],
        Some(&empty.0),
    );
    let v = json_of(&relaxed);
    assert_eq!(v["complete"], false);
    let mec = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "gc_9_5_0_mec.bin")
        .unwrap();
    assert_eq!(mec["status"], "missing");
    assert!(v["psp_load_order"].is_null());

    let strict = am(
        &["fw", "list", "--profile", "mi350x", "--strict"],
        Some(&empty.0),
    );
    assert!(!strict.status.success());
    let text = String::from_utf8_lossy(&strict.stdout);
    assert!(
        text.contains("gc_9_5_0_mec.bin") && text.contains("MISSING"),
        "{text}"
    );
}

#[test]
fn fw_check_prints_a_valid_file_and_fails_on_a_truncated_one_naming_file_and_offset() {
    let dir = TempDir::new("check");
    let out = am(
        &[
            "fw",
            "synth",
            "--profile",
            "navi31",
            dir.0.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success());
    let good = dir.0.join("gc_11_0_0_mec.bin");
    let v = json_of(&am(
        &["fw", "check", good.to_str().unwrap(), "--json"],
        None,
    ));
    assert_eq!(v["valid"], true);
    assert_eq!(v["kind"], "GFX");
    assert_eq!(v["header_version"], "2.0");

    let data = std::fs::read(&good).unwrap();
    let bad = dir.0.join("gc_11_0_0_rlc.bin");
    std::fs::write(&bad, &data[..16]).unwrap();
    let out = am(&["fw", "check", bad.to_str().unwrap()], None);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("gc_11_0_0_rlc.bin: truncated"), "{text}");
    assert!(text.contains("offset 0x0"), "{text}");
    assert!(
        out.stdout.is_empty(),
        "errors go to stderr, not stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn fw_check_refuses_what_is_not_a_regular_file_or_is_too_large() {
    let dir = TempDir::new("check-kinds");
    for (path, want) in [
        (
            "/dev/zero",
            "/dev/zero: not a regular file but a character device",
        ),
        (
            dir.0.to_str().unwrap(),
            "not a regular file but a directory",
        ),
    ] {
        let out = am(&["fw", "check", path], None);
        assert!(!out.status.success(), "{path}");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains(want), "{path}: {text}");
    }
    // A sparse file of 65 MiB: larger than any firmware, refused before it is read.
    let big = dir.0.join("gc_11_0_0_mec.bin");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(65 << 20).unwrap();
    let out = am(&["fw", "check", big.to_str().unwrap()], None);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("68157440 bytes is larger than the 67108864 bytes of any firmware file"),
        "{text}"
    );
}

#[test]
fn fw_list_with_a_wrong_pin_reports_the_mismatch() {
    let dir = TempDir::new("pins");
    let pins = dir.0.join("pins.txt");
    std::fs::write(&pins, format!("{}  smu_13_0_0.bin\n", "00".repeat(32))).unwrap();
    let out = am(
        &[
            "fw",
            "list",
            "--profile",
            "navi31",
            "--json",
            "--pins",
            pins.to_str().unwrap(),
        ],
        None,
    );
    let v = json_of(&out);
    let smu = &v["files"][1];
    assert_eq!(smu["name"], "smu_13_0_0.bin");
    assert_eq!(smu["status"], "invalid");
    assert!(
        smu["error"].as_str().unwrap().contains("SHA-256 mismatch"),
        "{smu}"
    );
    assert_eq!(v["complete"], false);
}

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    // The reader closes its end before `am` writes a byte: the first write fails with a
    // broken pipe, which must end the command with the SIGPIPE status and no panic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["fw", "list", "--profile", "mi300x", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn fw_check_and_fw_list_pins_refuse_a_fifo_without_blocking() {
    let d = crate::common::dir("fw-fifo");
    crate::common::fifo(&d.0.join("smu_13_0_0.bin"));
    let out = crate::common::am_in_bounded(&d, &["fw", "check", "smu_13_0_0.bin"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("smu_13_0_0.bin: not a regular file but a FIFO"),
        "{text}"
    );
    let out = crate::common::am_in_bounded(
        &d,
        &[
            "fw",
            "list",
            "--profile",
            "navi31",
            "--pins",
            "smu_13_0_0.bin",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("smu_13_0_0.bin: not a regular file but a FIFO"),
        "{text}"
    );
}
