//! Debian's firmware-amd-graphics (bookworm-backports, installed by `scripts/setup`): every
//! Navi31 and MI300X file parses, and the two sets give the PSP load order of the
//! driver.

// Tests may unwrap: a panic is the failure report.

use crate::common;

use std::path::PathBuf;

use am_firmware::locate::SYSTEM_FIRMWARE_DIR;
use am_firmware::parse::{self, Body, Gfx, Kind, Sdma};
use am_firmware::{
    FirmwareError, FirmwareSet, IpVersion, IpVersions, Locator, PlanOptions, PspFwType, PspStep,
    Role, SosVariant,
};
use common::{MI300_ORDER, NAVI31_ORDER, regions, step_names};

/// File name prefixes of the Navi31 and MI300X sets in Debian's package.
const PREFIXES: &[&str] = &[
    "gc_11_0_0_",
    "psp_13_0_0_",
    "smu_13_0_0.",
    "sdma_6_0_0.",
    "gc_9_4_3_",
    "psp_13_0_6_",
    "smu_13_0_6.",
    "sdma_4_4_2.",
];

fn system_locator() -> Locator {
    Locator::new(vec![PathBuf::from(SYSTEM_FIRMWARE_DIR)])
}

fn debian_files() -> Vec<PathBuf> {
    let dir = std::fs::read_dir(SYSTEM_FIRMWARE_DIR).unwrap_or_else(|e| {
        panic!("{SYSTEM_FIRMWARE_DIR}: {e}; run scripts/setup to install firmware-amd-graphics")
    });
    let mut files: Vec<PathBuf> = dir
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            PREFIXES.iter().any(|pre| name.starts_with(pre))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_navi31_and_mi300x_file_of_debian_parses_with_regions_inside_the_file() {
    let files = debian_files();
    // Each profile's loaded files plus the ones the driver does not load (TA, MES, PFP,
    // ME, sjt_mec, rlc_1): the 20250410 backports package has 20 of them.
    let names: Vec<String> = files
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .trim_end_matches(".zst")
                .to_string()
        })
        .collect();
    for profile in [IpVersions::NAVI31, IpVersions::MI300X] {
        for spec in profile.files() {
            assert!(
                names.contains(&spec.name),
                "{} missing from {SYSTEM_FIRMWARE_DIR}; run scripts/setup",
                spec.name
            );
        }
    }
    for path in &files {
        let data = am_firmware::locate::read_maybe_zst(path).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        let image = parse::parse(name, &data).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(
            image.kind(),
            Kind::Other,
            "{name}: kind not recognised from its name"
        );
        for r in regions(&image) {
            assert!(
                r.offset + r.len <= data.len(),
                "{name}: region {r:?} past the end"
            );
        }
    }
}

#[test]
fn debian_rs64_mec_splits_ucode_array_into_instructions_and_stack() {
    let raw = system_locator().read("gc_11_0_0_mec.bin").unwrap();
    let image = parse::parse(&raw.name, &raw.data).unwrap();
    let Body::Gfx(Gfx::V2 {
        ucode,
        data,
        ucode_start_addr,
        ..
    }) = image.body
    else {
        panic!(
            "gc_11_0_0_mec.bin is not a GFX v2 (RS64) image: {:?}",
            image.body
        );
    };
    assert_eq!(
        ucode.offset, image.ucode.offset,
        "instructions start the ucode array"
    );
    assert_eq!(
        data.offset,
        ucode.offset + ucode.len,
        "the stack follows the instructions"
    );
    assert_eq!(
        ucode.len + data.len,
        image.ucode.len,
        "the two parts fill the ucode array"
    );
    assert_ne!(ucode_start_addr, 0);
}

#[test]
fn debian_sdma_4_4_2_is_one_image_with_its_jump_table_at_the_end() {
    let raw = system_locator().read("sdma_4_4_2.bin").unwrap();
    let image = parse::parse(&raw.name, &raw.data).unwrap();
    let Body::Sdma(Sdma::V1 { jt, .. }) = image.body else {
        panic!("sdma_4_4_2.bin is not SDMA v1: {:?}", image.body);
    };
    assert!(jt.offset >= image.ucode.offset);
    assert!(jt.offset + jt.len <= image.ucode.offset + image.ucode.len);
}

#[test]
fn navi31_debian_set_loads_in_the_driver_order() {
    let set = FirmwareSet::load(IpVersions::NAVI31, &system_locator()).unwrap();
    let plan = set.plan(PlanOptions::default()).unwrap();
    assert_eq!(step_names(&plan), NAVI31_ORDER);

    // Each payload is the bytes its region names in its file.
    for step in &plan.steps {
        if let Some(p) = step.payload() {
            let file = set.files.iter().find(|f| f.spec.name == p.file).unwrap();
            assert_eq!(
                p.bytes(),
                &file.data[p.offset..p.offset + p.len()],
                "{step:?}"
            );
            assert!(!p.is_empty(), "{step:?} carries no bytes");
        }
    }
    // Before MP0 14 the SPL slot carries the KDB.
    let Body::PspSos(sos) = &set.file(Role::Sos).unwrap().image.body else {
        panic!("not a sOS package")
    };
    let kdb = sos
        .component(SosVariant::Primary, PspFwType::KDB)
        .unwrap()
        .region;
    match &plan.steps[1] {
        PspStep::Bootloader {
            component, payload, ..
        } => {
            assert_eq!(*component, PspFwType::KDB);
            assert_eq!(payload.offset, kdb.offset);
        }
        other => panic!("step 2 is {other:?}"),
    }
    let mec = set.file(Role::Mec).unwrap();
    let Body::Gfx(Gfx::V2 {
        ucode_start_addr, ..
    }) = mec.image.body
    else {
        panic!("MEC is not RS64");
    };
    assert_eq!(plan.ucode_start(Role::Mec), Some(ucode_start_addr));
}

#[test]
fn mi300x_debian_set_loads_in_the_driver_order_with_either_sos_set() {
    let set = FirmwareSet::load(IpVersions::MI300X, &system_locator()).unwrap();
    let primary = set.plan(PlanOptions::default()).unwrap();
    assert_eq!(step_names(&primary), MI300_ORDER);
    let aux = set
        .plan(PlanOptions {
            sos: SosVariant::Aux,
        })
        .unwrap();
    assert_eq!(step_names(&aux), MI300_ORDER);

    let Body::PspSos(sos) = &set.file(Role::Sos).unwrap().image.body else {
        panic!("not a sOS package")
    };
    let aux_index = sos.aux_index.expect("psp_13_0_6_sos.bin has a v2.1 header") as usize;
    let sos_step = |plan: &am_firmware::LoadPlan| {
        plan.steps
            .iter()
            .find_map(|s| match s {
                PspStep::Bootloader {
                    component: PspFwType::SOS,
                    payload,
                    ..
                } => Some(payload.offset),
                _ => None,
            })
            .unwrap()
    };
    let in_set = |offset: usize| {
        sos.components
            .iter()
            .position(|c| c.fw_type == PspFwType::SOS && c.region.offset == offset)
            .unwrap()
    };
    assert!(in_set(sos_step(&primary)) < aux_index);
    assert!(in_set(sos_step(&aux)) >= aux_index);
    assert_eq!(primary.ucode_start, Vec::new(), "GC 9 has no RS64 engines");
}

#[test]
fn rdna4_debian_set_loads_pfp_me_spl_and_no_setup_tmr() {
    // gfx1201 (RX 9070): GC 12.0.1, MP0/MP1 14.0.3, SDMA 7.0.1 — not a named profile, but
    // its files are in the same package and exercise the GC ≥ 12 / MP0 ≥ 14 rules.
    let ips = IpVersions {
        gc: IpVersion::new(12, 0, 1),
        mp0: IpVersion::new(14, 0, 3),
        mp1: IpVersion::new(14, 0, 3),
        sdma: IpVersion::new(7, 0, 1),
    };
    let set = FirmwareSet::load(ips, &system_locator()).unwrap();
    let plan = set.plan(PlanOptions::default()).unwrap();
    assert_eq!(
        step_names(&plan),
        [
            "PSP_BL__LOAD_KEY_DATABASE",
            "PSP_BL__LOAD_TOS_SPL_TABLE",
            "PSP_BL__LOAD_SYSDRV",
            "PSP_BL__LOAD_SOCDRV",
            "PSP_BL__LOAD_INTFDRV",
            "PSP_BL__LOAD_DBGDRV",
            "PSP_BL__LOAD_RASDRV",
            "PSP_BL__LOAD_SOSDRV",
            "GFX_CMD_ID_LOAD_TOC",
            "GFX_FW_TYPE_SMU",
            "GFX_FW_TYPE_SDMA_UCODE_TH0",
            "GFX_FW_TYPE_RS64_PFP",
            "GFX_FW_TYPE_RS64_PFP_P0_STACK",
            "GFX_FW_TYPE_RS64_ME",
            "GFX_FW_TYPE_RS64_ME_P0_STACK",
            "GFX_FW_TYPE_RS64_MEC",
            "GFX_FW_TYPE_RS64_MEC_P0_STACK",
            "GFX_FW_TYPE_IMU_I",
            "GFX_FW_TYPE_IMU_D",
            "GFX_FW_TYPE_RLC_IRAM",
            "GFX_FW_TYPE_RLC_DRAM_BOOT",
            "GFX_FW_TYPE_RLC_G",
            "GFX_CMD_ID_AUTOLOAD_RLC",
        ]
    );
    // From MP0 14 on the SPL slot carries the SPL itself.
    match &plan.steps[1] {
        PspStep::Bootloader { component, .. } => assert_eq!(*component, PspFwType::SPL),
        other => panic!("step 2 is {other:?}"),
    }
    for role in [Role::Pfp, Role::Me, Role::Mec] {
        assert!(plan.ucode_start(role).is_some(), "{role:?}");
    }
}

#[test]
fn every_file_of_the_package_with_a_known_kind_parses() {
    // Beyond the two sets: older parts exercise PSP v1.0–v1.3, SMC v1/v2.0, RLC v2.0–v2.2
    // and GFX v1 headers. Out of scope, and refused as unknown versions: RLC v1.0 (GFX6-8)
    // and v2.4 (tap delays, Navi2x), TA v1.0 (the driver loads no TA).
    let mut seen = std::collections::BTreeSet::new();
    let mut parsed = 0;
    for entry in std::fs::read_dir(SYSTEM_FIRMWARE_DIR).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let kind = Kind::from_file_name(&name);
        if kind == Kind::Other {
            continue;
        }
        let data = am_firmware::locate::read_maybe_zst(&path).unwrap();
        let image = match parse::parse(&name, &data) {
            Ok(image) => image,
            Err(FirmwareError::UnknownVersion {
                kind, major, minor, ..
            }) if matches!(
                (kind, major, minor),
                ("RLC", 1, 0) | ("RLC", 2, 4) | ("PSP TA", 1, 0)
            ) =>
            {
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        for r in regions(&image) {
            assert!(
                r.offset + r.len <= data.len(),
                "{name}: region {r:?} past the end"
            );
        }
        seen.insert((kind.name(), image.header_version()));
        parsed += 1;
    }
    for expected in [
        ("PSP SOS", (1, 0)),
        ("PSP SOS", (1, 1)),
        ("PSP SOS", (1, 3)),
        ("PSP SOS", (2, 1)),
        ("SMC", (1, 0)),
        ("SMC", (2, 0)),
        ("SDMA", (1, 0)),
        ("SDMA", (3, 0)),
        ("GFX", (1, 0)),
        ("RLC", (2, 0)),
        ("RLC", (2, 1)),
        ("RLC", (2, 2)),
    ] {
        assert!(
            seen.contains(&expected),
            "no {expected:?} file parsed; seen {seen:?}"
        );
    }
    assert!(parsed > 300, "only {parsed} files parsed");
}
