//! Malformed input is an error naming the file and the offset, never a panic.

// Tests may unwrap: a panic is the failure report.

use crate::common;

use std::mem::offset_of;

use am_autogen::ucode::{common_firmware_header, psp_firmware_header_v2_0, psp_fw_bin_desc};
use am_firmware::locate::{hex, search_dirs, sha256};
use am_firmware::parse::{self, Kind};
use am_firmware::{FirmwareError, IpVersions, Locator, Pins, synth};
use common::{TempDir, regions};
use proptest::prelude::*;

fn synthetic(name_suffix: &str) -> (String, Vec<u8>) {
    let ips = IpVersions::NAVI31;
    let spec = ips
        .files()
        .into_iter()
        .find(|s| s.name.ends_with(name_suffix))
        .unwrap();
    let data = synth::build(&spec, &ips);
    (spec.name, data)
}

fn put_u32(data: &mut [u8], at: usize, v: u32) {
    data[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn set_len(data: &mut Vec<u8>, len: usize) {
    data.truncate(len);
    put_u32(
        data,
        offset_of!(common_firmware_header, size_bytes),
        len as u32,
    );
}

#[test]
fn file_shorter_than_the_common_header_is_truncated_at_offset_0() {
    let (name, data) = synthetic("_sos.bin");
    let err = parse::parse(&name, &data[..20]).unwrap_err();
    match &err {
        FirmwareError::Truncated {
            file,
            offset,
            need,
            len,
            ..
        } => {
            assert_eq!(
                (file.as_str(), *offset, *need, *len),
                (name.as_str(), 0, 32, 20)
            );
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    assert!(
        err.to_string().starts_with("psp_13_0_0_sos.bin: truncated"),
        "{err}"
    );
}

#[test]
fn file_whose_length_differs_from_size_bytes_is_rejected_at_offset_0() {
    let (name, data) = synthetic("_rlc.bin");
    let err = parse::parse(&name, &data[..data.len() - 1]).unwrap_err();
    match err {
        FirmwareError::Invalid {
            file, what, offset, ..
        } => {
            assert_eq!(file, name);
            assert_eq!(what, "common_firmware_header.size_bytes");
            assert_eq!(offset, 0);
        }
        other => panic!("expected Invalid size_bytes, got {other:?}"),
    }
}

#[test]
fn descriptor_table_cut_short_is_truncated_at_the_missing_descriptor() {
    let (name, mut data) = synthetic("_sos.bin");
    // Keep the header and three descriptors, cut into the fourth.
    let table = size_of::<psp_firmware_header_v2_0>();
    let fourth = table + 3 * size_of::<psp_fw_bin_desc>();
    set_len(&mut data, fourth + 4);
    // The ucode array and the first three components now lie past the end: make them
    // empty so the table itself is what fails.
    put_u32(
        &mut data,
        offset_of!(common_firmware_header, ucode_size_bytes),
        0,
    );
    put_u32(
        &mut data,
        offset_of!(common_firmware_header, ucode_array_offset_bytes),
        0,
    );
    for i in 0..3 {
        let desc = table + i * size_of::<psp_fw_bin_desc>();
        put_u32(
            &mut data,
            desc + offset_of!(psp_fw_bin_desc, offset_bytes),
            0,
        );
        put_u32(&mut data, desc + offset_of!(psp_fw_bin_desc, size_bytes), 0);
    }
    let err = parse::parse(&name, &data).unwrap_err();
    match err {
        FirmwareError::Truncated {
            file, what, offset, ..
        } => {
            assert_eq!(file, name);
            assert_eq!(what, "psp_fw_bin[3]");
            assert_eq!(offset, fourth);
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
}

#[test]
fn descriptor_pointing_past_the_end_names_the_descriptor_and_its_offset() {
    let (name, mut data) = synthetic("_sos.bin");
    let table = size_of::<psp_firmware_header_v2_0>();
    let desc = table + 2 * size_of::<psp_fw_bin_desc>();
    put_u32(
        &mut data,
        desc + offset_of!(psp_fw_bin_desc, offset_bytes),
        0xffff_0000,
    );
    let err = parse::parse(&name, &data).unwrap_err();
    match &err {
        FirmwareError::OutOfBounds {
            file,
            what,
            field_offset,
            offset,
            len,
            ..
        } => {
            assert_eq!(file, &name);
            assert_eq!(what, "psp_fw_bin[2] TOC");
            assert_eq!(*field_offset, desc);
            assert_eq!(*offset, 0x200 + 0xffff_0000);
            assert_eq!(*len, data.len());
        }
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains(&format!("offset {desc:#x}")), "{text}");
}

#[test]
fn rs64_stack_past_the_end_is_out_of_bounds() {
    let (name, mut data) = synthetic("_mec.bin");
    let len = data.len() as u32;
    // data_offset_bytes of gfx_firmware_header_v2_0.
    let field = offset_of!(
        am_autogen::ucode::gfx_firmware_header_v2_0,
        data_offset_bytes
    );
    put_u32(&mut data, field, len - 8);
    match parse::parse(&name, &data).unwrap_err() {
        FirmwareError::OutOfBounds { what, end, .. } => {
            assert_eq!(what, "RS64 data (stack)");
            assert!(end > u64::from(len));
        }
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
}

#[test]
fn unknown_header_version_names_kind_version_and_offset() {
    for suffix in [
        "_sos.bin",
        "smu_13_0_0.bin",
        "sdma_6_0_0.bin",
        "_mec.bin",
        "_imu.bin",
        "_rlc.bin",
    ] {
        let (name, mut data) = synthetic(suffix);
        let at = offset_of!(common_firmware_header, header_version_major);
        data[at..at + 2].copy_from_slice(&9u16.to_le_bytes());
        match parse::parse(&name, &data).unwrap_err() {
            FirmwareError::UnknownVersion {
                file,
                kind,
                major,
                offset,
                ..
            } => {
                assert_eq!(file, name);
                assert_eq!(kind, Kind::from_file_name(&name).name());
                assert_eq!(major, 9);
                assert_eq!(offset, 8);
            }
            other => panic!("{name}: expected UnknownVersion, got {other:?}"),
        }
    }
}

#[test]
fn jump_table_larger_than_the_ucode_is_invalid() {
    let ips = IpVersions::MI300X;
    let spec = ips
        .files()
        .into_iter()
        .find(|s| s.name.ends_with("_mec.bin"))
        .unwrap();
    let mut data = synth::build(&spec, &ips);
    let field = offset_of!(am_autogen::ucode::gfx_firmware_header_v1_0, jt_size);
    put_u32(&mut data, field, 0x4000_0000);
    match parse::parse(&spec.name, &data).unwrap_err() {
        FirmwareError::Invalid { what, offset, .. } => {
            assert_eq!(what, "gfx_firmware_header_v1_0.jt_size");
            assert_eq!(offset, field);
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn pin_mismatch_names_the_path_and_both_digests() {
    let dir = TempDir::new("pins");
    let (name, data) = synthetic("_imu.bin");
    std::fs::write(dir.path().join(&name), &data).unwrap();
    let mut pins = Pins::new();
    pins.insert(name.clone(), [0x11; 32]);
    let locator = Locator::new(vec![dir.path().to_path_buf()]).with_pins(pins);
    match locator.read(&name).unwrap_err() {
        FirmwareError::HashMismatch {
            path,
            expected,
            found,
        } => {
            assert_eq!(path, dir.path().join(&name));
            assert_eq!(expected, "11".repeat(32));
            assert_eq!(found, hex(&sha256(&data)));
        }
        other => panic!("expected HashMismatch, got {other:?}"),
    }
    // The right pin passes.
    let mut pins = Pins::new();
    pins.insert(name.clone(), sha256(&data));
    let locator = Locator::new(vec![dir.path().to_path_buf()]).with_pins(pins);
    assert_eq!(locator.read(&name).unwrap().data, data);
}

#[test]
fn zst_files_are_found_decompressed_and_pinned_by_their_content() {
    let dir = TempDir::new("zst");
    let (name, data) = synthetic("_rlc.bin");
    let compressed =
        ruzstd::encoding::compress_to_vec(&data[..], ruzstd::encoding::CompressionLevel::Fastest);
    std::fs::write(dir.path().join(format!("{name}.zst")), compressed).unwrap();
    let mut pins = Pins::new();
    pins.insert(name.clone(), sha256(&data));
    let locator = Locator::new(vec![dir.path().to_path_buf()]).with_pins(pins);
    let raw = locator.read(&name).unwrap();
    assert_eq!(raw.path, dir.path().join(format!("{name}.zst")));
    assert_eq!(raw.data, data);
    assert!(parse::parse(&raw.name, &raw.data).is_ok());
}

#[test]
fn corrupt_zst_is_a_decompress_error_naming_the_file() {
    let dir = TempDir::new("badzst");
    let path = dir.path().join("gc_11_0_0_imu.bin.zst");
    std::fs::write(&path, b"\x28\xb5\x2f\xfdnot really zstd").unwrap();
    let locator = Locator::new(vec![dir.path().to_path_buf()]);
    match locator.read("gc_11_0_0_imu.bin").unwrap_err() {
        FirmwareError::Decompress { path: p, .. } => assert_eq!(p, path),
        other => panic!("expected Decompress, got {other:?}"),
    }
}

#[test]
fn earlier_search_directories_win_and_missing_files_name_every_directory() {
    let first = TempDir::new("first");
    let second = TempDir::new("second");
    let (name, data) = synthetic("_imu.bin");
    std::fs::write(first.path().join(&name), &data).unwrap();
    std::fs::write(second.path().join(&name), b"shadowed").unwrap();
    let locator = Locator::new(vec![
        first.path().to_path_buf(),
        second.path().to_path_buf(),
    ]);
    assert_eq!(locator.read(&name).unwrap().data, data);

    let err = locator.read("nope.bin").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, FirmwareError::NotFound { .. }));
    assert!(
        text.contains(&format!(
            "{}:{}",
            first.path().display(),
            second.path().display()
        )),
        "{text}"
    );
}

#[test]
fn am_firmware_path_dirs_come_before_the_system_directory() {
    let dirs = search_dirs(Some(std::ffi::OsStr::new("/a::/b")));
    let dirs: Vec<_> = dirs.iter().map(|d| d.to_str().unwrap()).collect();
    assert_eq!(dirs, ["/a", "/b", "/lib/firmware/amdgpu"]);
    assert_eq!(
        search_dirs(None),
        [std::path::PathBuf::from("/lib/firmware/amdgpu")]
    );
}

#[test]
fn pin_files_in_sha256sum_format_parse_and_bad_lines_name_their_number() {
    let digest = "ab".repeat(32);
    let text = format!(
        "# pins\n\n{digest}  /lib/firmware/amdgpu/psp_13_0_0_sos.bin\n{digest} *smu_13_0_0.bin\n"
    );
    let pins = Pins::parse(&text, "pins.txt").unwrap();
    assert_eq!(pins.len(), 2);
    assert_eq!(pins.get("psp_13_0_0_sos.bin"), Some(&[0xab; 32]));
    assert_eq!(pins.get("smu_13_0_0.bin"), Some(&[0xab; 32]));

    for (bad, line) in [
        (format!("{digest}  a.bin\nzz  b.bin\n"), 2),
        (format!("{digest}  a.bin.zst\n"), 1),
        ("justonefield\n".to_string(), 1),
    ] {
        match Pins::parse(&bad, "pins.txt").unwrap_err() {
            FirmwareError::BadPin {
                source_name,
                line: l,
                ..
            } => {
                assert_eq!((source_name.as_str(), l), ("pins.txt", line), "{bad}");
            }
            other => panic!("expected BadPin, got {other:?}"),
        }
    }
}

#[test]
fn plan_without_an_sos_component_names_the_missing_component() {
    let dir = TempDir::new("nosos");
    let ips = IpVersions::MI350X;
    synth::write_set(dir.path(), &ips).unwrap();
    // Retag the SOS descriptor (index 1 in the synthetic package) as IPKEYMGR_DRV.
    let path = dir.path().join("psp_13_0_14_sos.bin");
    let mut data = std::fs::read(&path).unwrap();
    let desc = size_of::<psp_firmware_header_v2_0>() + size_of::<psp_fw_bin_desc>();
    put_u32(&mut data, desc + offset_of!(psp_fw_bin_desc, fw_type), 11);
    std::fs::write(&path, data).unwrap();
    let set =
        am_firmware::FirmwareSet::load(ips, &Locator::new(vec![dir.path().to_path_buf()])).unwrap();
    match set.plan(Default::default()).unwrap_err() {
        FirmwareError::MissingComponent {
            file,
            component,
            offset,
        } => {
            assert_eq!(file, "psp_13_0_14_sos.bin");
            assert_eq!(component, "SOS");
            assert_eq!(offset, size_of::<psp_firmware_header_v2_0>());
        }
        other => panic!("expected MissingComponent, got {other:?}"),
    }
}

/// Every synthetic file of every profile, the material the property tests mutate.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for ips in [IpVersions::NAVI31, IpVersions::MI300X, IpVersions::MI350X] {
        for spec in ips.files() {
            let data = synth::build(&spec, &ips);
            out.push((spec.name, data));
        }
    }
    out
}

fn check_no_panic_and_regions_inside(name: &str, data: &[u8]) {
    if let Ok(image) = parse::parse(name, data) {
        for r in regions(&image) {
            assert!(
                r.offset
                    .checked_add(r.len)
                    .is_some_and(|end| end <= data.len())
            );
        }
    }
}

const NAMES: &[&str] = &[
    "psp_13_0_0_sos.bin",
    "smu_13_0_6.bin",
    "sdma_6_0_0.bin",
    "sdma_4_4_2.bin",
    "sdma_7_0_0.bin",
    "gc_11_0_0_mec.bin",
    "gc_9_4_3_mec.bin",
    "gc_11_0_0_imu.bin",
    "gc_11_0_0_rlc.bin",
    "gc_11_0_0_mes.bin",
    "psp_13_0_0_ta.bin",
    "other.bin",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_never_panic(name in prop::sample::select(NAMES), data in prop::collection::vec(any::<u8>(), 0..600)) {
        check_no_panic_and_regions_inside(name, &data);
    }

    #[test]
    fn random_header_with_matching_size_never_panics(
        name in prop::sample::select(NAMES),
        major in 0u16..4,
        minor in 0u16..5,
        mut data in prop::collection::vec(any::<u8>(), 64..600),
    ) {
        // Get past the size and version checks so the versioned parsers see random fields.
        let len = data.len() as u32;
        data[0..4].copy_from_slice(&len.to_le_bytes());
        data[8..10].copy_from_slice(&major.to_le_bytes());
        data[10..12].copy_from_slice(&minor.to_le_bytes());
        data[24..28].copy_from_slice(&0u32.to_le_bytes());
        check_no_panic_and_regions_inside(name, &data);
    }

    #[test]
    fn truncated_or_mutated_valid_files_never_panic(
        seed in 0usize..18,
        cut in any::<prop::sample::Index>(),
        pokes in prop::collection::vec((any::<prop::sample::Index>(), any::<u32>()), 0..4),
        fix_size in any::<bool>(),
    ) {
        let seeds = seeds();
        let (name, mut data) = seeds[seed % seeds.len()].clone();
        let len = cut.index(data.len() + 1);
        data.truncate(len);
        for (at, value) in pokes {
            // Overwrite a dword of the header area, where the offsets and sizes are.
            let header = data.len().min(0x200);
            if header >= 4 {
                let at = at.index(header - 3);
                data[at..at + 4].copy_from_slice(&value.to_le_bytes());
            }
        }
        if fix_size && data.len() >= 4 {
            let len = data.len() as u32;
            data[0..4].copy_from_slice(&len.to_le_bytes());
        }
        check_no_panic_and_regions_inside(&name, &data);
    }
}

#[test]
fn a_zst_stream_of_several_frames_decodes_whole_and_skips_skippable_frames() {
    use ruzstd::encoding::{CompressionLevel, compress_to_vec};
    let first: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    let second: Vec<u8> = (0..3000u32).map(|i| (i * 13 + 1) as u8).collect();
    let mut stream = compress_to_vec(&first[..], CompressionLevel::Fastest);
    // A skippable frame (RFC 8878, 3.1.2): magic 0x184D2A5?, a 4-byte length, that many bytes.
    stream.extend_from_slice(&0x184D_2A53u32.to_le_bytes());
    stream.extend_from_slice(&3u32.to_le_bytes());
    stream.extend_from_slice(b"abc");
    stream.extend_from_slice(&compress_to_vec(&second[..], CompressionLevel::Fastest));
    let out = am_firmware::locate::decompress_zstd(&stream, 1 << 20).unwrap();
    assert_eq!(out, [first.clone(), second].concat());

    let err = am_firmware::locate::decompress_zstd(&stream, 6000).unwrap_err();
    assert!(err.contains("exceeds 6000 bytes"), "{err}");

    let mut cut = compress_to_vec(&first[..], CompressionLevel::Fastest);
    cut.extend_from_slice(&0x184D_2A50u32.to_le_bytes());
    cut.extend_from_slice(&100u32.to_le_bytes());
    let err = am_firmware::locate::decompress_zstd(&cut, 1 << 20).unwrap_err();
    assert!(err.contains("skippable frame of 100 bytes"), "{err}");
}
