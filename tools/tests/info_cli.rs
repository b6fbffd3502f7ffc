//! `am info --json` end to end on the mock profiles: the numbers the issue names.

#![allow(clippy::unwrap_used)]

use std::process::Command;

fn info_json(spec: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["info", spec, "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn navi31_json_reports_gc_11_0_0_and_96_cus() {
    let j = info_json("mock:navi31");
    assert_eq!(j["ip_versions"]["GC"], "11.0.0");
    assert_eq!(j["gc"]["cu_count"], 96);
    assert_eq!(j["gc"]["wave_size"], 32);
    assert_eq!(j["function"], "PF");
    assert_eq!(j["large_bar"], false);
}

#[test]
fn mi300x_json_reports_8_xccs_on_4_aids() {
    let j = info_json("mock:mi300x");
    assert_eq!(j["xcc_count"], 8);
    assert_eq!(j["aid_count"], 4);
    assert_eq!(j["ip_versions"]["GC"], "9.4.3");
}

#[test]
fn vf_json_says_vf_and_why_discovery_failed() {
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["info", "mock:mi350x-vf", "--json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["function"], "VF");
    assert!(j["error"].as_str().unwrap().contains("gated"));
}
