//! `am info --json` end to end on the mock profiles: the numbers the issue names.

use std::process::Command;

use crate::common;
use common::Server;

fn info_json(spec: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["info", spec, "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn info_on_a_missing_pci_address_names_it_once_and_points_at_am_list() {
    // The address, unless this machine has a device there.
    let bdf = ["0000:03:00.0", "0000:fe:1f.7"]
        .into_iter()
        .find(|b| {
            !std::path::Path::new("/sys/bus/pci/devices")
                .join(b)
                .exists()
        })
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["info", bdf])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        format!(
            "am: {bdf}: no PCI device at this address (/sys/bus/pci/devices/{bdf} does not \
             exist); `am list` shows the AMD GPUs on this machine"
        ),
        "one message, nothing doubled"
    );
}

#[test]
fn navi31_json_reports_gc_11_0_0_and_96_cus() {
    let j = info_json("mock:navi31");
    assert_eq!(j["ip_versions"]["GC"], "11.0.0");
    assert_eq!(j["gc"]["cu_count"], 96);
    assert_eq!(j["gc"]["wave_size"], 32);
    assert_eq!(j["function"], "PF");
    assert_eq!(j["large_bar"], false);
    // A fresh mock: no AM driver has booted it.
    assert_eq!(j["boot_state"]["am_initialised"], false);
    assert_eq!(j["error"], serde_json::Value::Null);
}

#[test]
fn a_complete_report_exits_zero() {
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["info", "mock:mi300x"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("XCCs         8 on 4 AID(s)"), "{text}");
}

#[test]
fn mi300x_json_reports_8_xccs_on_4_aids() {
    let j = info_json("mock:mi300x");
    assert_eq!(j["xcc_count"], 8);
    assert_eq!(j["aid_count"], 4);
    assert_eq!(j["ip_versions"]["GC"], "9.4.3");
}

#[test]
fn vf_json_says_vf_and_that_init_access_was_granted_and_released() {
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["info", "mock:mi350x-vf", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["function"], "VF");
    assert_eq!(j["vf_access"], "granted and released");
    assert_eq!(j["ip_versions"]["GC"], "9.5.0");
    assert_eq!(j["hive"], serde_json::Value::Null);
    assert_eq!(j["boot_state"], serde_json::Value::Null);
}

#[test]
fn a_hive_member_says_which_region_it_is() {
    let out = Command::new(env!("CARGO_BIN_EXE_am"))
        .args(["info", "mock:mi300x-hive4:1"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("  XGMI hive    region 1 of 4 (192 GiB segments)"),
        "{text}"
    );
    let j = info_json("mock:mi300x-hive4:2");
    assert_eq!(j["hive"]["region"], 2);
    assert_eq!(j["hive"]["regions"], 4);
    assert_eq!(j["hive"]["segment_size"], 192u64 << 30);
    let j = info_json("mock:mi300x");
    assert_eq!(j["hive"], serde_json::Value::Null);
}

#[test]
fn remote_info_answers_as_the_served_mock_does() {
    let server = Server::start(&["mock:navi31"], &[]);
    let mut remote = info_json(&server.spec(0));
    let mut local = info_json("mock:navi31");
    drop(server);
    assert_eq!(remote["backend"], "remote");
    // `am info` only reads: the served device stays without an owner.
    assert_eq!(
        remote["owner"],
        "nobody (the first client that writes owns the device)"
    );
    assert_eq!(local["owner"], serde_json::Value::Null);
    // Everything but the names of device and backend (and the error text that starts with
    // the device name) and the owner is the same.
    for j in [&mut remote, &mut local] {
        let o = j.as_object_mut().unwrap();
        o.remove("device");
        o.remove("backend");
        o.remove("error");
        o.remove("owner");
    }
    assert_eq!(remote, local);
    assert_eq!(remote["gc"]["cu_count"], 96);
}

#[test]
fn rdna4_json_reports_gc_12_ip_versions_and_cus() {
    for (spec, gc, target, cus, mp) in [
        ("mock:navi48", "12.0.1", "gfx1201", 64, "14.0.3"),
        ("mock:navi44", "12.0.0", "gfx1200", 32, "14.0.2"),
    ] {
        let j = info_json(spec);
        assert_eq!(j["ip_versions"]["GC"], gc, "{spec}");
        assert_eq!(j["ip_versions"]["MP0"], mp, "{spec}");
        assert_eq!(
            j["ip_versions"]["SDMA0"].as_str().unwrap()[..2],
            *"7.",
            "{spec}"
        );
        assert_eq!(j["gfx_target"], target, "{spec}");
        assert_eq!(j["gc"]["cu_count"], cus, "{spec}");
        assert_eq!(j["gc"]["wave_size"], 32, "{spec}");
        assert_eq!(j["error"], serde_json::Value::Null, "{spec}");
    }
}
