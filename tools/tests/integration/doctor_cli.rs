//! `am doctor` on fake machines: one test per finding (its status, and the BDF, file and advice
//! its message names), a machine without an AMD GPU, `--json`, and the exit status. No test
//! reads this machine's /sys or /proc.

use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use serde_json::Value;

use crate::common;
use common::fake_machine::{ALL_CAPS, FakeMachine};

const GPU: &str = "0000:03:00.0";

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `am doctor --json` on `m`; the whole report.
fn report(m: &FakeMachine, env: &[(&str, &str)]) -> Value {
    json(&m.doctor(&["--json"], env))
}

/// The one finding of `check` (for `device`, or machine-wide for `None`).
fn find<'a>(r: &'a Value, check: &str, device: Option<&str>) -> &'a Value {
    let hits: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check && f["device"].as_str() == device)
        .collect();
    assert_eq!(hits.len(), 1, "one {check} finding for {device:?} in {r:#}");
    hits[0]
}

/// Asserts the finding's status and that `seen` and `advice` hold the given words.
fn expect(f: &Value, status: &str, seen: &[&str], advice: &[&str]) {
    assert_eq!(f["status"], status, "{f:#}");
    let text = f["seen"].as_str().unwrap();
    for w in seen {
        assert!(text.contains(w), "seen lacks {w:?}: {f:#}");
    }
    let adv = f["advice"].as_str().unwrap_or("");
    for w in advice {
        assert!(adv.contains(w), "advice lacks {w:?}: {f:#}");
    }
}

/// A machine with one Navi 31 at `GPU`, unbound, resizable to 16 GiB, its firmware present.
fn machine_with_gpu(tag: &str) -> FakeMachine {
    let m = FakeMachine::new(tag);
    m.add_gpu(GPU, 0x744c, Some(16 << 30));
    m.synth_firmware("navi31");
    m
}

#[test]
fn without_an_amd_gpu_it_says_so_lists_the_device_checks_and_exits_0() {
    let m = FakeMachine::new("empty");
    // A NIC is not an AMD GPU.
    m.add_function("0000:01:00.0", 0x8086, 0x1533, 0x020000, &[(0, 1 << 20)]);
    let out = m.doctor(&[], &[]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("No AMD GPU found on this machine's PCI bus"),
        "{text}"
    );
    for check in [
        "driver",
        "iommu-group",
        "bars",
        "enable",
        "permissions",
        "firmware",
    ] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{check} "))),
            "{check} missing from {text}"
        );
    }
    assert!(text.contains("This machine\n  ok       iommu"), "{text}");
    // A machine-wide failure does not make a machine without a GPU fail.
    m.write(
        "sys/kernel/security/lockdown",
        "none [integrity] confidentiality\n",
    );
    let out = m.doctor(&["--json"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let r = json(&out);
    assert_eq!(r["summary"]["gpus"], 0);
    assert_eq!(r["summary"]["fail"], 1);
    assert_eq!(r["summary"]["exit_code"], 0);
    assert_eq!(r["would_check"].as_array().unwrap().len(), 6);
    assert_eq!(r["gpus"], Value::Array(vec![]));
}

#[test]
fn json_is_one_object_of_findings_and_a_summary_that_adds_up() {
    let m = machine_with_gpu("json");
    let out = m.doctor(&["--json"], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = json(&out);
    let findings = r["findings"].as_array().unwrap();
    // Seven machine-wide checks, six per GPU.
    assert_eq!(findings.len(), 13, "{r:#}");
    let s = &r["summary"];
    let total: u64 = ["ok", "warn", "fail", "skipped"]
        .iter()
        .map(|k| s[k].as_u64().unwrap())
        .sum();
    assert_eq!(total, 13);
    assert_eq!(s["fail"], 0, "{r:#}");
    assert_eq!(s["gpus"], 1);
    assert_eq!(r["gpus"][0]["bdf"], GPU);
    assert_eq!(r["gpus"][0]["device_id"], 0x744c);
    assert_eq!(r["gpus"][0]["name"], "Navi 31 [Radeon RX 7900 XT/7900 XTX]");
    for f in findings {
        assert!(
            ["ok", "warn", "fail", "skipped"].contains(&f["status"].as_str().unwrap()),
            "{f}"
        );
    }
    assert!(r["would_check"].as_array().unwrap().is_empty());
    // Text: the machine's section, then the GPU's, then the counts.
    let out = m.doctor(&[], &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "\n{GPU} Navi 31 [Radeon RX 7900 XT/7900 XTX] (1002:744c)\n"
        )),
        "{text}"
    );
    assert!(
        text.ends_with("\n11 ok, 1 warn, 0 fail, 1 skipped\n"),
        "{text}"
    );
}

#[test]
fn no_iommu_is_fine_for_sysfs_and_names_noiommu_mode_for_vfio() {
    let m = FakeMachine::new("no-iommu");
    let r = report(&m, &[]);
    expect(
        find(&r, "iommu", None),
        "ok",
        &[
            "no IOMMU",
            "class/iommu",
            "iommu_groups",
            "no-IOMMU mode off",
        ],
        &["enable_unsafe_noiommu_mode=1"],
    );
}

#[test]
fn a_translating_iommu_warns_and_points_at_vfio_or_iommu_pt() {
    let m = FakeMachine::new("iommu-dma");
    m.write("sys/class/iommu/ivhd0/.keep", "");
    m.add_gpu(GPU, 0x744c, None);
    m.join_group(GPU, 7, "DMA-FQ");
    m.synth_firmware("navi31");
    let r = report(&m, &[]);
    expect(
        find(&r, "iommu", None),
        "warn",
        &["IOMMU on (ivhd0)", "1 groups", "no IOMMU option"],
        &["VFIO=1", "iommu=pt"],
    );
    expect(
        find(&r, "iommu-group", Some(GPU)),
        "warn",
        &[GPU, "IOMMU group 7", "type DMA-FQ", "translated"],
        &["VFIO=1", "iommu=pt"],
    );
    // Only VFIO can work then, and vfio-pci is not loaded.
    expect(
        find(&r, "vfio-pci", None),
        "fail",
        &["not loaded", "only backend"],
        &["modprobe vfio-pci"],
    );

    // Passthrough on the command line: both backends work.
    m.write("proc/cmdline", "ro quiet amd_iommu=on iommu=pt\n");
    let r = report(&m, &[]);
    expect(
        find(&r, "iommu", None),
        "ok",
        &["amd_iommu=on iommu=pt", "passthrough"],
        &[],
    );
}

#[test]
fn vfio_pci_missing_warns_fails_when_asked_for_and_is_ok_when_loaded() {
    let m = FakeMachine::new("vfio");
    let r = report(&m, &[]);
    expect(
        find(&r, "vfio-pci", None),
        "warn",
        &["not loaded", "bus/pci/drivers/vfio-pci", "module/vfio_pci"],
        &["sudo modprobe vfio-pci"],
    );
    let r = report(&m, &[("VFIO", "1")]);
    expect(
        find(&r, "vfio-pci", None),
        "fail",
        &["VFIO=1 is set"],
        &["sudo modprobe vfio-pci"],
    );
    // Loaded, with an IOMMU: type1.
    std::fs::create_dir_all(m.sys().join("bus/pci/drivers/vfio-pci")).unwrap();
    m.write("sys/class/iommu/dmar0/.keep", "");
    let r = report(&m, &[]);
    expect(find(&r, "vfio-pci", None), "ok", &["loaded", "type1"], &[]);
    // Loaded in no-IOMMU mode.
    m.write(
        "sys/module/vfio/parameters/enable_unsafe_noiommu_mode",
        "Y\n",
    );
    let r = report(&m, &[]);
    expect(find(&r, "vfio-pci", None), "ok", &["no-IOMMU mode"], &[]);
}

#[test]
fn vfio_pci_without_iommu_or_noiommu_mode_warns() {
    let m = FakeMachine::new("vfio-noiommu");
    std::fs::create_dir_all(m.sys().join("module/vfio_pci")).unwrap();
    let r = report(&m, &[]);
    expect(
        find(&r, "vfio-pci", None),
        "warn",
        &["loaded", "module/vfio_pci"],
        &["enable_unsafe_noiommu_mode"],
    );
}

#[test]
fn missing_cap_sys_admin_fails_the_privileges_check() {
    let m = FakeMachine::new("privileges");
    m.set_status(4242, 4242, "0000000000000000");
    let r = report(&m, &[]);
    expect(
        find(&r, "privileges", None),
        "fail",
        &[
            "effective uid 4242",
            "CAP_SYS_ADMIN missing",
            "pagemap",
            "self/status",
        ],
        &["sudo"],
    );
    m.set_status(0, 0, ALL_CAPS);
    let r = report(&m, &[]);
    expect(
        find(&r, "privileges", None),
        "ok",
        &["CAP_SYS_ADMIN held"],
        &[],
    );
}

#[test]
fn a_small_memlock_limit_without_cap_ipc_lock_warns() {
    let m = FakeMachine::new("memlock");
    m.set_memlock("8388608");
    // CAP_SYS_ADMIN only: the memlock limit binds.
    m.set_status(0, 0, "0000000000200000");
    let r = report(&m, &[]);
    expect(
        find(&r, "memlock", None),
        "warn",
        &[
            "Max locked memory 8 MiB",
            "self/limits",
            "without CAP_IPC_LOCK",
        ],
        &["ulimit -l unlimited", "limits.conf"],
    );
    // With CAP_IPC_LOCK the limit does not matter.
    m.set_status(0, 0, ALL_CAPS);
    let r = report(&m, &[]);
    expect(
        find(&r, "memlock", None),
        "ok",
        &["CAP_IPC_LOCK is held"],
        &[],
    );
    m.set_memlock("unlimited");
    let r = report(&m, &[]);
    expect(find(&r, "memlock", None), "ok", &["unlimited"], &[]);
}

#[test]
fn no_free_hugepage_warns_with_the_sysctl_to_set() {
    let m = FakeMachine::new("hugepages");
    m.set_hugepages(4, 0);
    let r = report(&m, &[]);
    expect(
        find(&r, "hugepages", None),
        "warn",
        &["4 reserved, 0 free", "meminfo", "contiguous"],
        &["/proc/sys/vm/nr_hugepages"],
    );
    m.set_hugepages(16, 12);
    let r = report(&m, &[]);
    expect(
        find(&r, "hugepages", None),
        "ok",
        &["16 reserved, 12 free"],
        &[],
    );
}

#[test]
fn kernel_lockdown_fails_naming_the_level_and_the_refused_files() {
    let m = FakeMachine::new("lockdown");
    m.write(
        "sys/kernel/security/lockdown",
        "none integrity [confidentiality]\n",
    );
    let r = report(&m, &[]);
    expect(
        find(&r, "lockdown", None),
        "fail",
        &[
            "confidentiality",
            "security/lockdown",
            "resourceN",
            "config",
        ],
        &["Secure Boot"],
    );
    m.remove("sys/kernel/security/lockdown");
    let r = report(&m, &[]);
    expect(
        find(&r, "lockdown", None),
        "skipped",
        &["does not exist"],
        &[],
    );
}

#[test]
fn am_variables_are_listed_with_their_meaning_and_unknown_ones_warn() {
    let m = FakeMachine::new("env");
    let r = report(
        &m,
        &[
            ("AM_RESET", "1"),
            ("AM_POWER_LIMIT", "250"),
            ("HOME", "/root"),
        ],
    );
    expect(
        find(&r, "environment", None),
        "ok",
        &[
            "AM_POWER_LIMIT=250 (SMU power limit",
            "AM_RESET=1 (1: never warm boot",
        ],
        &[],
    );
    assert!(
        !find(&r, "environment", None)["seen"]
            .as_str()
            .unwrap()
            .contains("HOME")
    );
    let r = report(&m, &[("AM_REST", "1")]);
    expect(
        find(&r, "environment", None),
        "warn",
        &["AM_REST=1 (not read by am)"],
        &["spelling of AM_REST", "AM_RESET"],
    );
}

#[test]
fn amdgpu_bound_fails_with_the_bdf_and_how_to_unload_it_and_exits_1() {
    let m = machine_with_gpu("amdgpu");
    m.bind(GPU, "amdgpu");
    let out = m.doctor(&["--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let r = json(&out);
    expect(
        find(&r, "driver", Some(GPU)),
        "fail",
        &[GPU, "bound to amdgpu", "`driver` link"],
        &[
            "modprobe -r amdgpu",
            &format!("echo {GPU}"),
            "drivers/amdgpu/unbind",
        ],
    );
    assert_eq!(r["summary"]["exit_code"], 1);
    // Text says the same, with the advice on its own line.
    let out = m.doctor(&[], &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("  FAIL     driver       {GPU} is bound to amdgpu")),
        "{text}"
    );
    assert!(text.contains("do: stop what uses the GPU"), "{text}");

    // vfio-pci is what VFIO=1 wants; no driver is fine too.
    let m = machine_with_gpu("vfio-bound");
    m.bind(GPU, "vfio-pci");
    let r = report(&m, &[]);
    expect(find(&r, "driver", Some(GPU)), "ok", &["vfio-pci"], &[]);
}

#[test]
fn group_members_with_other_drivers_are_named_for_vfio() {
    let m = machine_with_gpu("group");
    m.add_function("0000:03:00.1", 0x1002, 0xab30, 0x040300, &[]);
    m.add_function("0000:00:14.0", 0x8086, 0x7ae0, 0x0c0330, &[]);
    m.add_function("0000:00:01.0", 0x1022, 0x14ab, 0x060400, &[]);
    m.bind("0000:03:00.1", "snd_hda_intel");
    m.bind("0000:00:14.0", "xhci_hcd");
    m.bind("0000:00:01.0", "pcieport");
    for bdf in [GPU, "0000:03:00.1", "0000:00:14.0", "0000:00:01.0"] {
        m.join_group(bdf, 12, "identity");
    }
    let r = report(&m, &[]);
    let f = find(&r, "iommu-group", Some(GPU));
    expect(
        f,
        "warn",
        &[
            "IOMMU group 12 (type identity)",
            "0000:00:14.0 (xhci_hcd) is not",
            "0000:03:00.1 (snd_hda_intel)",
        ],
        &["vfio-pci", "driver_override"],
    );
    // The PCIe port and the GPU's own audio function do not block VFIO.
    let seen = f["seen"].as_str().unwrap();
    let blocking = seen.split("; VFIO needs").nth(1).unwrap();
    assert!(
        !blocking.contains("pcieport") && !blocking.contains("snd_hda_intel"),
        "{seen}"
    );

    // Alone in an identity group: nothing to do.
    let m = machine_with_gpu("group-alone");
    m.join_group(GPU, 3, "identity");
    let r = report(&m, &[]);
    expect(
        find(&r, "iommu-group", Some(GPU)),
        "ok",
        &["IOMMU group 3 (type identity), alone"],
        &[],
    );
    // Without iommu=pt, identity groups are what the sysfs backend needs.
    expect(
        find(&r, "iommu", None),
        "ok",
        &["every GPU's group is of type identity"],
        &[],
    );
    // No IOMMU: nothing to check.
    let m = machine_with_gpu("group-none");
    let r = report(&m, &[]);
    expect(
        find(&r, "iommu-group", Some(GPU)),
        "skipped",
        &["iommu_group", "no IOMMU"],
        &[],
    );
}

#[test]
fn bars_report_sizes_resizable_bar_and_small_or_missing_bars() {
    let m = machine_with_gpu("bars");
    let r = report(&m, &[]);
    expect(
        find(&r, "bars", Some(GPU)),
        "ok",
        &[
            "BAR0 (VRAM window) 256 MiB",
            "BAR2 (doorbells) 2 MiB",
            "BAR5 (registers) 1 MiB",
            "resizable up to 16 GiB",
            "resource0_resize",
        ],
        &[],
    );

    let m = FakeMachine::new("bars-small");
    m.add_gpu(GPU, 0x744c, None);
    let r = report(&m, &[]);
    expect(
        find(&r, "bars", Some(GPU)),
        "warn",
        &[GPU, "resource0_resize", "small BAR", "MM_INDEX"],
        &["Resizable BAR", "Above 4G Decoding"],
    );

    let m = FakeMachine::new("bars-none");
    m.add_function(GPU, 0x1002, 0x744c, 0x030000, &[(2, 2 << 20), (5, 1 << 20)]);
    let r = report(&m, &[]);
    expect(
        find(&r, "bars", Some(GPU)),
        "fail",
        &["BAR0 (VRAM window) none", "no address"],
        &["Above 4G Decoding", "pci=realloc"],
    );
}

#[test]
fn enable_says_whether_am_will_enable_the_device() {
    let m = machine_with_gpu("enable");
    let r = report(&m, &[]);
    expect(
        find(&r, "enable", Some(GPU)),
        "ok",
        &["enable is 0", "am writes 1"],
        &[],
    );
    m.write(&format!("sys/bus/pci/devices/{GPU}/enable"), "1\n");
    let r = report(&m, &[]);
    expect(
        find(&r, "enable", Some(GPU)),
        "ok",
        &["enable is 1: enabled"],
        &[],
    );
}

#[test]
fn files_this_user_cannot_open_fail_the_permissions_check() {
    let m = machine_with_gpu("perms");
    let (uid, gid) = m.stranger();
    m.set_status(uid, gid, ALL_CAPS);
    let r = report(&m, &[]);
    expect(
        find(&r, "permissions", Some(GPU)),
        "ok",
        &[&format!("uid {uid} may read and write all 5 files")],
        &[],
    );
    let resource0 = m.device_dir(GPU).join("resource0");
    std::fs::set_permissions(&resource0, std::fs::Permissions::from_mode(0o600)).unwrap();
    let r = report(&m, &[]);
    expect(
        find(&r, "permissions", Some(GPU)),
        "fail",
        &[
            &format!("uid {uid} may not use"),
            &format!("{GPU}/resource0 (mode 600"),
        ],
        &["sudo -E am"],
    );
    // With VFIO=1 the VFIO nodes count too; missing ones say when they appear.
    std::fs::set_permissions(&resource0, std::fs::Permissions::from_mode(0o666)).unwrap();
    m.join_group(GPU, 5, "identity");
    let r = report(&m, &[("VFIO", "1")]);
    expect(
        find(&r, "permissions", Some(GPU)),
        "warn",
        &["missing", "dev/vfio/vfio", "dev/vfio/5"],
        &["bound to it"],
    );
}

#[test]
fn firmware_is_found_and_parsed_and_a_missing_or_broken_file_fails() {
    let m = machine_with_gpu("firmware");
    let r = report(&m, &[]);
    expect(
        find(&r, "firmware", Some(GPU)),
        "ok",
        &[
            "profile navi31 (GC 11.0.0",
            "6 files found and parsed",
            "PSP load order",
            "only after IP discovery",
        ],
        &[],
    );
    m.remove("firmware/gc_11_0_0_mec.bin");
    std::fs::write(m.firmware().join("psp_13_0_0_sos.bin"), b"not firmware").unwrap();
    let out = m.doctor(&["--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let r = json(&out);
    expect(
        find(&r, "firmware", Some(GPU)),
        "fail",
        &[
            "gc_11_0_0_mec.bin missing",
            "psp_13_0_0_sos.bin: ",
            "searched",
        ],
        &[
            "firmware-amd-graphics",
            "AM_FIRMWARE_PATH",
            "am fw list --profile navi31",
        ],
    );

    // A GPU the project has no firmware profile for (Navi 33).
    let m = FakeMachine::new("firmware-unknown");
    m.add_gpu(GPU, 0x7480, Some(8 << 30));
    let r = report(&m, &[]);
    expect(
        find(&r, "firmware", Some(GPU)),
        "warn",
        &["0x7480", "Navi 33", "gfx1102", "IP discovery"],
        &["am init"],
    );

    // A VF (MI300X VF) with no firmware at all: its PF loaded it.
    let m = FakeMachine::new("firmware-vf");
    m.add_gpu(GPU, 0x74b5, None);
    let r = report(&m, &[]);
    expect(
        find(&r, "firmware", Some(GPU)),
        "skipped",
        &[GPU, "SR-IOV VF", "PF loaded"],
        &[],
    );
}

#[test]
fn a_named_device_limits_the_report_and_an_absent_one_is_an_error() {
    let m = machine_with_gpu("named");
    m.add_gpu("0000:04:00.0", 0x744c, None);
    let r = json(&m.doctor(&["--json", "04:00.0"], &[]));
    assert_eq!(r["summary"]["gpus"], 1);
    assert_eq!(r["gpus"][0]["bdf"], "0000:04:00.0");
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["device"] != GPU)
    );
    let out = m.doctor(&["0000:09:00.0"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no AMD GPU at 0000:09:00.0"), "{err}");
}
