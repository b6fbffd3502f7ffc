//! The synthetic firmware sets: valid headers, deterministic content, the same load order
//! as the real files, and every payload pointing at the region the builder wrote.

// Tests may unwrap: a panic is the failure report.

use crate::common;

use am_firmware::parse::{self, Body, Gfx};
use am_firmware::{
    FirmwareSet, IpVersions, Locator, PlanOptions, PspStep, Role, SosVariant, synth,
};
use common::{MI300_ORDER, NAVI31_ORDER, TempDir, regions, step_names};

/// The marker the builder puts at the start of every region.
fn marker_of(payload: &am_firmware::Payload) -> String {
    let bytes = payload.bytes();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn load_synthetic(ips: IpVersions, tag: &str) -> (TempDir, FirmwareSet) {
    let dir = TempDir::new(tag);
    let written = synth::write_set(dir.path(), &ips).unwrap();
    assert_eq!(written.len(), ips.files().len());
    // Only the synthetic directory: the host's firmware must not fill gaps.
    let locator = Locator::new(vec![dir.path().to_path_buf()]);
    let set = FirmwareSet::load(ips, &locator).unwrap();
    (dir, set)
}

#[test]
fn synthetic_mi350x_set_parses_and_loads_in_the_mi300_order() {
    let (_dir, set) = load_synthetic(IpVersions::MI350X, "mi350x");
    let names: Vec<&str> = set.files.iter().map(|f| f.spec.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "psp_13_0_14_sos.bin",
            "smu_13_0_14.bin",
            "sdma_4_4_5.bin",
            "gc_9_5_0_mec.bin",
            "gc_9_5_0_rlc.bin"
        ]
    );
    let plan = set.plan(PlanOptions::default()).unwrap();
    assert_eq!(step_names(&plan), MI300_ORDER);
}

#[test]
fn synthetic_payloads_are_the_regions_the_builder_wrote() {
    for (ips, tag) in [
        (IpVersions::NAVI31, "navi31"),
        (IpVersions::MI300X, "mi300x"),
        (IpVersions::MI350X, "mi350x"),
    ] {
        let (_dir, set) = load_synthetic(ips, tag);
        let plan = set.plan(PlanOptions::default()).unwrap();
        for step in &plan.steps {
            let Some(p) = step.payload() else { continue };
            let marker = marker_of(p);
            let expected_part = match step {
                PspStep::Bootloader { component, .. } => component.to_string(),
                PspStep::LoadToc { .. } => "TOC".to_string(),
                PspStep::LoadIpFw { fw_type, .. } => {
                    let name = fw_type.name().unwrap();
                    match name {
                        "SMU" | "RLC_G" | "IMU_I" | "IMU_D" | "RLC_P" | "RLC_V" => name.to_string(),
                        n if n.starts_with("RLC_RESTORE_LIST") => n.to_string(),
                        "RLC_IRAM" => "RLC_IRAM".to_string(),
                        "RLC_DRAM_BOOT" => "RLC_DRAM".to_string(),
                        "REG_LIST" => "RL".to_string(),
                        "P2S_TABLE" => "pptable.0x50325358".to_string(),
                        n if n.starts_with("SDMA_UCODE_TH") => format!("SDMA.{}", &n[11..]),
                        n if n.starts_with("SDMA") => "SDMA".to_string(),
                        "RS64_MEC" => "MEC.ucode".to_string(),
                        "RS64_MEC_P0_STACK" => "MEC.data".to_string(),
                        "CP_MEC" => "MEC".to_string(),
                        // The jump table is the tail of the MEC image.
                        "CP_MEC_ME1" => continue,
                        other => panic!("unexpected step {other}"),
                    }
                }
                PspStep::SetupTmr | PspStep::AutoloadRlc => unreachable!(),
            };
            assert_eq!(
                marker,
                format!("AMSYNTH:{}:{expected_part}", p.file),
                "{tag}: {step:?}"
            );
        }
    }
}

#[test]
fn synthetic_navi31_set_loads_in_the_navi31_order_with_its_rs64_start() {
    let (_dir, set) = load_synthetic(IpVersions::NAVI31, "navi31-order");
    let plan = set.plan(PlanOptions::default()).unwrap();
    assert_eq!(step_names(&plan), NAVI31_ORDER);
    assert_eq!(plan.ucode_start(Role::Mec), Some(synth::SYNTH_RS64_START));
    let mec = set.file(Role::Mec).unwrap();
    assert!(matches!(mec.image.body, Body::Gfx(Gfx::V2 { .. })));
}

#[test]
fn synthetic_mi300x_sos_has_an_aux_set_the_plan_can_choose() {
    let (_dir, set) = load_synthetic(IpVersions::MI300X, "mi300x-aux");
    let aux = set
        .plan(PlanOptions {
            sos: SosVariant::Aux,
        })
        .unwrap();
    assert_eq!(step_names(&aux), MI300_ORDER);
    let first = aux.steps[0].payload().unwrap();
    assert_eq!(marker_of(first), "AMSYNTH:psp_13_0_6_sos.bin:KDB.aux");
    let primary = set.plan(PlanOptions::default()).unwrap();
    assert_eq!(
        marker_of(primary.steps[0].payload().unwrap()),
        "AMSYNTH:psp_13_0_6_sos.bin:KDB"
    );
}

#[test]
fn synthetic_files_are_deterministic_and_distinct() {
    for ips in [IpVersions::NAVI31, IpVersions::MI300X, IpVersions::MI350X] {
        let specs = ips.files();
        let first: Vec<Vec<u8>> = specs.iter().map(|s| synth::build(s, &ips)).collect();
        let second: Vec<Vec<u8>> = specs.iter().map(|s| synth::build(s, &ips)).collect();
        assert_eq!(first, second);
        for (i, a) in first.iter().enumerate() {
            for b in &first[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}

#[test]
fn synthetic_headers_carry_the_ip_version_and_their_regions_fit() {
    let ips = IpVersions::MI350X;
    for spec in ips.files() {
        let data = synth::build(&spec, &ips);
        let image = parse::parse(&spec.name, &data).unwrap();
        let ip = match spec.role {
            Role::Sos => ips.mp0,
            Role::Smu => ips.mp1,
            Role::Sdma => ips.sdma,
            _ => ips.gc,
        };
        assert_eq!(
            (image.header.ip_version_major, image.header.ip_version_minor),
            (u16::from(ip.major), u16::from(ip.minor)),
            "{}",
            spec.name
        );
        assert_eq!(image.header.size_bytes as usize, data.len());
        assert_eq!(image.header.ucode_version, synth::SYNTH_UCODE_VERSION);
        for r in regions(&image) {
            assert!(r.offset + r.len <= data.len());
        }
    }
}
