//! `am init`, `am reset` and `am bench boot` end to end on the mock profiles. Each run is a
//! process of its own with a fresh `mock:` device; a warm boot needs the device to outlive the
//! first run, so it goes through a mock served by `am serve` (and the unit tests of
//! `init.rs` open twice in one process).

use std::process::{Command, Output};

use serde_json::Value;

use crate::common;
use common::Server;

/// Runs `am` with the boot-state environment cleared (so a caller's `AM_RESET=1` or
/// `AM_POWER_LIMIT` does not change what the tests see).
fn am(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_am"));
    cmd.args(args)
        .env_remove("AM_RESET")
        .env_remove("AM_POWER_LIMIT");
    for (k, v) in env {
        cmd.env(k, v);
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

fn phase_names(boot: &Value) -> Vec<String> {
    boot["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn init_navi31_json_is_a_cold_full_boot_with_its_phases_then_finalised() {
    let j = json_of(&am(&["init", "mock:navi31", "--json"], &[]));
    assert_eq!(j["boot_kind"], "cold");
    assert!(
        j["full_boot_reason"]
            .as_str()
            .unwrap()
            .contains("SCRATCH_REG7"),
        "{j}"
    );
    let names = phase_names(&j);
    for want in ["init_sw", "soc", "gmc", "ih", "psp", "smu", "gfx", "sdma"] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    // PSP before GFX: the firmware is there before the engines start.
    let at = |n: &str| names.iter().position(|x| x == n).unwrap();
    assert!(at("psp") < at("gfx"), "{names:?}");
    for p in j["phases"].as_array().unwrap() {
        assert!(p["duration_ms"].is_f64() && p["reg_reads"].is_u64(), "{p}");
    }
    assert!(j["firmware"].is_array());
    assert_eq!(j["function"], "PF");
    assert_eq!(j["hive"], Value::Null);
    assert_eq!(j["finalised"], true);
    assert_eq!(j["error"], Value::Null);
}

/// GC 12 (RDNA4) boots as navi31 does: cold through PSP 14 and SMU 14, the firmware of
/// Debian's package loaded, then finalised.
#[test]
fn init_of_rdna4_is_a_cold_boot_then_finalised() {
    for spec in ["mock:navi48", "mock:navi44"] {
        let j = json_of(&am(&["init", spec, "--json"], &[]));
        assert_eq!(j["boot_kind"], "cold", "{spec}");
        let names = phase_names(&j);
        assert!(names.iter().any(|n| n == "psp"), "{spec}: {names:?}");
        assert!(!j["firmware"].as_array().unwrap().is_empty(), "{spec}");
        assert_eq!(j["finalised"], true, "{spec}");
        assert_eq!(j["error"], Value::Null, "{spec}");
    }
}

#[test]
fn init_with_am_reset_says_why_it_did_a_full_boot() {
    let j = json_of(&am(
        &["init", "mock:navi31", "--json"],
        &[("AM_RESET", "1")],
    ));
    assert_eq!(j["full_boot_reason"], "AM_RESET=1");
}

#[test]
fn init_of_a_vf_is_a_vf_boot_without_psp_or_smu() {
    let j = json_of(&am(&["init", "mock:mi350x-vf", "--json"], &[]));
    assert_eq!(j["boot_kind"], "vf");
    assert_eq!(j["function"], "VF");
    let names = phase_names(&j);
    assert!(!names.iter().any(|n| n == "psp" || n == "smu"), "{names:?}");
    assert!(names.iter().any(|n| n == "gfx"), "{names:?}");
    assert_eq!(j["finalised"], true);
}

#[test]
fn init_of_a_hive_member_names_its_hive_and_region() {
    let j = json_of(&am(&["init", "mock:mi300x-hive4:1", "--json"], &[]));
    assert_eq!(j["boot_kind"], "cold");
    assert_eq!(j["hive"]["regions"], 4);
    assert_eq!(j["hive"]["region"], 1);
    assert_eq!(j["finalised"], true);
}

#[test]
fn reset_of_a_hive_member_points_to_the_hive_reset() {
    let out = am(&["reset", "mock:mi300x-hive4:2"], &[]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("am hive-reset"), "{err}");
}

#[test]
fn init_text_names_the_boot_kind_and_the_finalisation() {
    let out = am(&["init", "mock:mi300x"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("cold boot in"), "{text}");
    assert!(text.contains("finalised    SCRATCH_REG6 = 0"), "{text}");
}

#[test]
fn init_errors_exit_non_zero_with_the_drivers_message() {
    let out = am(&["init", "mock:navi31"], &[("AM_POWER_LIMIT", "lots")]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("AM_POWER_LIMIT=\"lots\" is not a whole number of watts"),
        "{err}"
    );
}

#[test]
fn reset_navi31_succeeds_and_says_whether_there_was_anything_to_reset() {
    let out = am(&["reset", "mock:navi31"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("mode1 reset through the SMU") || text.contains("nothing to reset"),
        "{text}"
    );
    let j = json_of(&am(&["reset", "mock:navi31", "--json"], &[]));
    assert!(j["reset_ms"].is_f64());
    assert!(j["smu_was_running"].is_boolean());
    assert_eq!(j["open"]["boot_kind"], "reset-only");
    assert_eq!(j["function"], "PF");
}

#[test]
fn reset_of_a_vf_is_refused() {
    let out = am(&["reset", "mock:mi350x-vf"], &[]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("a VF cannot reset the GPU: its PF owns the SMU"),
        "{err}"
    );
}

#[test]
fn bench_boot_reports_full_and_warm_of_each_pf_profile_and_vf() {
    let j = json_of(&am(&["bench", "boot", "--iterations", "1", "--json"], &[]));
    let rows: Vec<(String, String, Value)> = j["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["profile"].as_str().unwrap().to_string(),
                r["kind"].as_str().unwrap().to_string(),
                r["boot_kinds"].clone(),
            )
        })
        .collect();
    let want = [
        ("navi31", "full", "cold"),
        ("navi31", "warm", "warm"),
        ("navi48", "full", "cold"),
        ("navi48", "warm", "warm"),
        ("navi44", "full", "cold"),
        ("navi44", "warm", "warm"),
        ("mi300x", "full", "cold"),
        ("mi300x", "warm", "warm"),
        ("mi350x-vf", "vf", "vf"),
    ];
    assert_eq!(rows.len(), want.len(), "{rows:?}");
    for (row, (p, k, b)) in rows.iter().zip(want) {
        assert_eq!((row.0.as_str(), row.1.as_str()), (p, k));
        assert_eq!(row.2, serde_json::json!([b]));
    }
    for r in j["results"].as_array().unwrap() {
        assert_eq!(r["iterations"], 1);
        assert!(r["reg_accesses_median"].as_u64().unwrap() > 0, "{r}");
        assert!(r["wall_ms_min"].is_f64(), "{r}");
        assert!(r["cpu_ms_min"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn bench_boot_takes_the_profiles_it_is_given() {
    let j = json_of(&am(
        &[
            "bench",
            "boot",
            "--profile",
            "navi31",
            "--iterations",
            "2",
            "--json",
        ],
        &[],
    ));
    let results = j["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|r| r["profile"] == "navi31"));
    assert!(results.iter().all(|r| r["iterations"] == 2));
}

#[test]
fn a_second_init_through_am_serve_is_a_warm_boot() {
    // The served mock lives in the server's process, so it outlives each `am init` as a GPU
    // outlives a driver instance.
    let server = Server::start(&["mock:navi31"], &[]);
    let spec = server.spec(0);
    let first = json_of(&am(&["init", &spec, "--json"], &[]));
    let second = json_of(&am(&["init", &spec, "--json"], &[]));
    drop(server);
    assert_eq!(first["backend"], "remote");
    assert_eq!(first["boot_kind"], "cold");
    assert_eq!(second["boot_kind"], "warm");
    assert_eq!(second["full_boot_reason"], Value::Null);
    let names = phase_names(&second);
    assert!(!names.iter().any(|n| n == "psp" || n == "smu"), "{names:?}");
    assert_eq!(second["firmware"], serde_json::json!([]));
}

#[test]
fn what_init_loads_through_the_psp_is_what_fw_list_plans() {
    for profile in ["navi31", "mi300x"] {
        let plan = json_of(&am(&["fw", "list", "--profile", profile, "--json"], &[]));
        let boot = json_of(&am(&["init", &format!("mock:{profile}:7"), "--json"], &[]));
        let planned: Vec<(String, u64)> = plan["psp_load_order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().unwrap().to_string(),
                    s["size"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        let loaded: Vec<(String, u64)> = boot["firmware"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["step"].as_str().unwrap().to_string(),
                    s["bytes"].as_u64().unwrap(),
                )
            })
            .collect();
        assert!(!planned.is_empty(), "{profile}");
        assert_eq!(loaded, planned, "{profile}");
    }
}
