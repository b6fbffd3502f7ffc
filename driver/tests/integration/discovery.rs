//! Discovery: parsing hand-built tables, the small-BAR path and malformed input.

use crate::common;

use am_driver::discovery::{DiscoveryTable, HarvestEntry, IpVersion};
use am_driver::{Discovery, Error, ErrorKind, HwIp, PciDevice};
use common::*;

fn discovery(table: &[u8]) -> Discovery {
    let dev = FakeDevice::new(256, 256 << 20, table);
    Discovery::read(&dev).unwrap()
}

#[test]
fn navi31_table_gives_versions_bases_and_96_cus() {
    let d = discovery(&navi31_like());
    assert_eq!(d.vram_size, 256 << 20);
    assert!(d.large_bar);
    assert!(d.table.checksum_valid);
    assert!(!d.table.base_addr_64_bit);
    assert_eq!(d.version(HwIp::GC), Some(IpVersion::new(11, 0, 0)));
    assert_eq!(d.version(HwIp::NBIO), Some(IpVersion::new(4, 3, 0)));
    assert_eq!(d.version(HwIp::MP1), Some(IpVersion::new(13, 0, 0)));
    assert_eq!(
        d.entry(HwIp::GC, 0).unwrap().bases,
        vec![0x1260, 0xa000, 0x1c000, 0x2402c00]
    );
    let gc = d.table.gc_info.unwrap();
    assert_eq!((gc.num_se, gc.num_sh_per_se, gc.num_cu_per_sh), (6, 2, 8));
    assert_eq!(gc.wave_size, 32);
    assert_eq!(d.xcc_count(), 1);
    assert_eq!(d.cu_count(), Some(96));
    assert_eq!(d.reserved_vram_size(), 64 << 20);
}

#[test]
fn mi300x_table_keeps_64_bit_bases_and_counts_xccs_on_aids() {
    let d = discovery(&mi300x_like(&[]));
    assert!(d.table.base_addr_64_bit);
    assert_eq!(d.table.num_dies, 4);
    assert_eq!(d.xcc_count(), 8);
    assert_eq!(d.aid_count(), 4);
    assert_eq!(d.version(HwIp::GC), Some(IpVersion::new(9, 4, 3)));
    // Die 3's second GC: bases keep the AID bits above bit 32.
    assert_eq!(
        d.entry(HwIp::GC, 7).unwrap().bases,
        vec![(3 << 32) | 0x1260, (3 << 32) | 0xea000]
    );
    assert_eq!(d.entry(HwIp::GC, 7).unwrap().die, 3);
    let gc = d.table.gc_info.unwrap();
    assert_eq!(gc.version, (2, 0));
    assert_eq!(gc.wave_size, 64);
    assert_eq!(d.cu_count(), Some(8 * 40));
    assert_eq!(d.reserved_vram_size(), 384 << 20);
}

#[test]
fn harvested_instances_are_excluded() {
    let d = discovery(&mi300x_like(&[(GC_HWID, 0), (GC_HWID, 5)]));
    assert_eq!(
        d.table.harvest,
        vec![
            HarvestEntry {
                hw_id: GC_HWID,
                instance: 0
            },
            HarvestEntry {
                hw_id: GC_HWID,
                instance: 5
            }
        ]
    );
    assert_eq!(
        d.instances(HwIp::GC).into_iter().collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 6, 7]
    );
    assert_eq!(d.xcc_count(), 6);
    assert_eq!(d.cu_count(), Some(6 * 40));
    // The version comes from the lowest live instance.
    assert_eq!(d.version(HwIp::GC), Some(IpVersion::new(9, 4, 3)));
    assert_eq!(d.aid_count(), 4);
}

#[test]
fn small_bar_reads_the_table_through_mm_index() {
    let table = navi31_like();
    // 256 MiB of VRAM but a 64 MiB BAR0: the table at the top is out of BAR0's reach.
    let dev = FakeDevice::new(256, 64 << 20, &table);
    let d = Discovery::read(&dev).unwrap();
    assert!(!d.large_bar);
    assert_eq!(
        *dev.bar5.window_reads.lock().unwrap(),
        (table.len() / 4) as u64
    );
    assert_eq!(d.table, DiscoveryTable::parse("x", &table).unwrap());
    assert_eq!(d.cu_count(), Some(96));
}

#[test]
fn large_bar_does_not_use_the_window() {
    let dev = FakeDevice::new(256, 256 << 20, &navi31_like());
    Discovery::read(&dev).unwrap();
    assert_eq!(*dev.bar5.window_reads.lock().unwrap(), 0);
}

#[test]
fn small_bar_window_addresses_above_2_gib() {
    // MM_INDEX_HI holds address bits 31 and up; a table above 2 GiB needs it.
    let table = navi31_like();
    let dev = FakeDevice::new(4096 + 64, 64 << 20, &table);
    let d = Discovery::read(&dev).unwrap();
    assert!(!d.large_bar);
    assert_eq!(d.version(HwIp::GC), Some(IpVersion::new(11, 0, 0)));
}

#[test]
fn all_ff_table_says_vram_is_gated() {
    let err = DiscoveryTable::parse("dev", &vec![0xff; 10 << 10]).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::DiscoverySignature {
                    found: 0xffff_ffff,
                    ..
                },
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("discovery signatures mismatch"), "{msg}");
    assert!(msg.contains("VRAM is gated"), "{msg}");
    assert!(msg.contains("ff ff ff ff"), "{msg}");
}

#[test]
fn wrong_ip_discovery_signature_names_it() {
    let mut t = navi31_like();
    t[IP_OFF..IP_OFF + 4].copy_from_slice(b"IPDX");
    let msg = DiscoveryTable::parse("dev", &t).unwrap_err().to_string();
    assert!(msg.contains("ip_discovery_header.signature"), "{msg}");
    assert!(msg.contains("0x53445049"), "{msg}");
    assert!(!msg.contains("gated"), "{msg}");
}

#[test]
fn bad_checksum_is_reported_not_fatal() {
    let mut t = navi31_like();
    t[0x2400] ^= 1;
    let table = DiscoveryTable::parse("dev", &t).unwrap();
    assert!(!table.checksum_valid);
}

#[test]
fn a_binary_size_inside_the_header_is_no_valid_checksum() {
    // tinygrad's mock GPU leaves binary_size and binary_checksum 0: an empty sum equals the
    // zero checksum, but no table is covered (Linux refuses such a binary).
    let mut t = navi31_like();
    t[8..12].fill(0);
    let table = DiscoveryTable::parse("dev", &t).unwrap();
    assert!(
        !table.checksum_valid,
        "binary_size 0 covers nothing, so the checksum cannot be valid"
    );
}

#[test]
fn num_ips_past_the_end_is_an_error_with_offset() {
    let mut t = navi31_like();
    // die_header.num_ips of die 0.
    t[DIE_OFF + 2..DIE_OFF + 4].copy_from_slice(&0xffffu16.to_le_bytes());
    let err = DiscoveryTable::parse("dev", &t).unwrap_err();
    let Error {
        kind: ErrorKind::MalformedDiscovery { what, offset, .. },
        ..
    } = &err
    else {
        panic!("{err}")
    };
    assert!(
        what.starts_with("ip_v4 entry") || what.starts_with("base address"),
        "{err}"
    );
    assert!(
        *offset as usize >= DIE_OFF && *offset as usize <= t.len(),
        "{err}"
    );
}

#[test]
fn too_many_dies_is_an_error() {
    let mut t = navi31_like();
    // ip_discovery_header.num_dies sits after signature, version, size and id.
    t[IP_OFF + 12..IP_OFF + 14].copy_from_slice(&17u16.to_le_bytes());
    let msg = DiscoveryTable::parse("dev", &t).unwrap_err().to_string();
    assert!(msg.contains("num_dies is 17"), "{msg}");
}

#[test]
fn truncated_tables_are_errors() {
    let t = navi31_like();
    for len in [0, 3, 20, IP_OFF + 10, DIE_OFF + 2, DIE_OFF + 30, GC_OFF + 8] {
        let err = DiscoveryTable::parse("dev", &t[..len]).unwrap_err();
        assert!(
            matches!(
                err,
                Error {
                    kind: ErrorKind::MalformedDiscovery { .. },
                    ..
                }
            ),
            "len {len}: {err}"
        );
        assert!(err.to_string().contains("do not fit"), "len {len}: {err}");
    }
}

#[test]
fn unknown_gc_info_version_is_an_error() {
    let mut t = navi31_like();
    t[GC_OFF + 4..GC_OFF + 6].copy_from_slice(&3u16.to_le_bytes());
    let msg = DiscoveryTable::parse("dev", &t).unwrap_err().to_string();
    assert!(msg.contains("gc_info") && msg.contains("3.0"), "{msg}");
}

#[test]
fn bad_harvest_signature_is_an_error() {
    let mut t = mi300x_like(&[(GC_HWID, 1)]);
    t[HARVEST_OFF] ^= 0xff;
    let msg = DiscoveryTable::parse("dev", &t).unwrap_err().to_string();
    assert!(
        msg.contains("harvest_table") && msg.contains("HARV"),
        "{msg}"
    );
}

#[test]
fn vram_size_all_ones_is_an_error() {
    let dev = FakeDevice::new(256, 256 << 20, &navi31_like());
    dev.bar5.regs.lock().unwrap()[0xde3] = u32::MAX;
    let msg = Discovery::read(&dev).unwrap_err().to_string();
    assert!(
        msg.contains("RCC_CONFIG_MEMSIZE") && msg.contains("gated"),
        "{msg}"
    );
}

#[test]
fn vf_bit_is_read_from_rcc_iov_func_identifier() {
    let dev = FakeDevice::new(256, 256 << 20, &navi31_like());
    assert!(!am_driver::vf::is_vf(&*dev.bar(5).unwrap()).unwrap());
    dev.bar5.regs.lock().unwrap()[0xde5] = 1;
    assert!(am_driver::vf::is_vf(&*dev.bar(5).unwrap()).unwrap());
}

#[test]
fn ip_entry_head_is_eight_bytes_with_variant_and_sub_revision_last() {
    let mut t = navi31_like();
    // First entry of die 0 follows the 4-byte die_header; byte 7 of its head.
    t[DIE_OFF + 4 + 7] = 0x52;
    let table = DiscoveryTable::parse("dev", &t).unwrap();
    let gc = &table.ips[0];
    assert_eq!((gc.variant, gc.sub_revision), (5, 2));
    // The bases start after the full 8-byte head.
    assert_eq!(gc.bases, vec![0x1260, 0xa000, 0x1c000, 0x2402c00]);
}
