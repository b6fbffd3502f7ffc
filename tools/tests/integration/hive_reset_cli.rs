//! `am hive-reset` end to end: a 4-device mock hive, VFs, the amdgpu refusal on a fake sysfs
//! tree, and — through `am serve`, whose process keeps the mock hive between commands —
//! foreign firmware left for the reset, then every member booting on the next open.

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common;
use common::Server;

fn am(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_am"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn members(first: u32) -> Vec<String> {
    (first..first + 4)
        .map(|i| format!("mock:mi300x-hive4:{i}"))
        .collect()
}

#[test]
fn resets_every_member_of_a_4_device_hive_and_reports_each() {
    let specs = members(240);
    let mut args = vec!["hive-reset", "--json"];
    args.extend(specs.iter().map(String::as_str));
    let out = am(&args, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = json(&out);
    assert_eq!(
        (j["reset"].as_u64(), j["failed"].as_u64()),
        (Some(4), Some(0))
    );
    for (r, d) in j["devices"].as_array().unwrap().iter().enumerate() {
        assert_eq!(d["device"], specs[r]);
        assert_eq!(d["function"], "PF");
        assert_eq!(d["result"], "reset");
        assert_eq!(d["hive"]["region"], r as u64);
        assert_eq!(d["hive"]["regions"], 4);
        assert_eq!(d["hive"]["segment_size"], 192u64 << 30);
    }
    // Text: one line per device and the totals.
    let mut args = vec!["hive-reset"];
    let specs = members(244);
    args.extend(specs.iter().map(String::as_str));
    let out = am(&args, &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    for (r, s) in specs.iter().enumerate() {
        assert!(
            text.contains(&format!(
                "{s} (PF, hive region {r} of 4, 192 GiB segments): reset"
            )),
            "{text}"
        );
    }
    assert!(text.ends_with("4 reset, 0 skipped, 0 failed\n"), "{text}");
}

#[test]
fn a_vf_is_reported_as_unable_to_reset_and_the_pfs_are_reset() {
    let out = am(
        &[
            "hive-reset",
            "--json",
            "mock:mi350x-vf:248",
            "mock:mi300x-hive2:248",
            "mock:mi300x-hive2:249",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = json(&out);
    let d = &j["devices"];
    assert_eq!(d[0]["function"], "VF");
    assert_eq!(d[0]["result"], "skipped");
    assert!(
        d[0]["reason"]
            .as_str()
            .unwrap()
            .contains("a VF cannot reset"),
        "{d}"
    );
    assert_eq!(d[1]["result"], "reset");
    assert_eq!(d[2]["result"], "reset");
    assert_eq!(d[2]["hive"]["regions"], 2);
    assert_eq!(
        (j["reset"].as_u64(), j["skipped"].as_u64()),
        (Some(2), Some(1))
    );
}

#[test]
fn a_device_that_cannot_be_opened_means_nothing_is_reset() {
    let out = am(
        &[
            "hive-reset",
            "--json",
            "mock:mi300x-hive4:252",
            "mock:nosuch:0",
        ],
        &[],
    );
    assert!(!out.status.success());
    let j = json(&out);
    assert_eq!(j["devices"][1]["result"], "failed");
    assert!(
        j["devices"][1]["reason"]
            .as_str()
            .unwrap()
            .contains("unknown mock profile")
    );
    assert_eq!(j["devices"][0]["result"], "skipped");
    assert!(
        j["devices"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("mock:nosuch:0 could not be opened")
    );
    assert_eq!(j["reset"], 0);
}

/// A fake sysfs tree with what `sysfs::scan` reads, removed when dropped.
struct FakeTree(PathBuf);

impl FakeTree {
    fn new(tag: &str) -> Self {
        let root = std::env::temp_dir().join(format!("am-hive-reset-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
        Self(root)
    }

    fn add(&self, bdf: &str, device: u16) {
        let d = self.0.join("bus/pci/devices").join(bdf);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("vendor"), "0x1002\n").unwrap();
        std::fs::write(d.join("device"), format!("{device:#06x}\n")).unwrap();
        std::fs::write(d.join("class"), "0x038000\n").unwrap();
        std::fs::write(d.join("resource"), "0x0 0x0 0x0\n").unwrap();
    }

    fn link(&self, bdf: &str, name: &str, target: &str) {
        let t = self.0.join(target);
        std::fs::create_dir_all(&t).unwrap();
        symlink(t, self.0.join("bus/pci/devices").join(bdf).join(name)).unwrap();
    }

    fn root(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for FakeTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn refuses_while_amdgpu_is_bound_naming_device_and_driver() {
    let tree = FakeTree::new("amdgpu");
    tree.add("0000:03:00.0", 0x74a1);
    tree.link("0000:03:00.0", "driver", "bus/pci/drivers/amdgpu");
    tree.add("0000:04:00.0", 0x74a1);
    tree.add("0000:05:00.0", 0x744c); // Navi 31: not a hive GPU, not picked by default
    tree.link("0000:05:00.0", "driver", "bus/pci/drivers/amdgpu");
    let out = am(&["hive-reset", "--sysfs-root", tree.root()], &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to reset: 0000:03:00.0 is bound to amdgpu"),
        "{err}"
    );
    assert!(!err.contains("0000:05:00.0"), "{err}");
    // Nothing was touched: the driver link is still there.
    assert!(tree.0.join("bus/pci/devices/0000:03:00.0/driver").exists());
    // Named explicitly, next to a mock device: the same refusal, before anything is opened.
    let out = am(
        &[
            "hive-reset",
            "--sysfs-root",
            tree.root(),
            "mock:mi300x-hive4:252",
            "0000:03:00.0",
        ],
        &[],
    );
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("0000:03:00.0 is bound to amdgpu"),);
}

#[test]
fn by_default_a_vf_of_the_bus_is_listed_but_not_reset() {
    let tree = FakeTree::new("vf");
    tree.add("0000:11:00.0", 0x75b0);
    tree.link("0000:11:00.0", "physfn", "host-pf");
    let out = am(&["hive-reset", "--json", "--sysfs-root", tree.root()], &[]);
    // Nothing to reset on a VM that only has VFs.
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing was reset"));
    let j = json(&out);
    assert_eq!(j["devices"][0]["device"], "0000:11:00.0");
    assert_eq!(j["devices"][0]["function"], "VF");
    assert_eq!(j["devices"][0]["result"], "skipped");

    let empty = FakeTree::new("empty");
    let out = am(&["hive-reset", "--sysfs-root", empty.root()], &[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no supported AMD GPU"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn foreign_firmware_is_left_for_the_reset_and_every_member_boots_afterwards() {
    // The server process holds the hive, started as amdgpu leaves it.
    let specs = members(256);
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let server = Server::start(&specs, &[("AM_MOCK_FOREIGN_FIRMWARE", "1")]);
    let remote: Vec<String> = (0..4).map(|i| server.spec(i)).collect();
    let mut args = vec!["hive-reset", "--json"];
    args.extend(remote.iter().map(String::as_str));

    // First run: every member runs foreign firmware; a reset-mode open brings nothing up
    // and the SMU takes the reset.
    let out = am(&args, &[]);
    let j = json(&out);
    assert!(out.status.success(), "{j}");
    for d in j["devices"].as_array().unwrap() {
        assert_eq!(d["result"], "reset", "{d}");
        assert!(
            d["found"].as_str().unwrap().contains("nothing initialised"),
            "{d}"
        );
    }
    // Second run: the reset took the firmware down, so there is nothing left to reset.
    let out = am(&args, &[]);
    let j = json(&out);
    assert!(!out.status.success(), "nothing was reset: {j}");
    for d in j["devices"].as_array().unwrap() {
        assert_eq!(d["result"], "skipped", "{d}");
        assert!(
            d["reason"]
                .as_str()
                .unwrap()
                .contains("SMU firmware was not running"),
            "{d}"
        );
    }
    // And every member boots: a cold boot, since the reset cleared the firmware.
    for r in &remote {
        let out = am(&["init", "--json", r.as_str()], &[]);
        let j = json(&out);
        assert!(out.status.success(), "{r}: {j}");
        assert_eq!(j["boot_kind"], "cold", "{r}: {j}");
    }
}
