//! Registers: table resolution per discovered version, addresses per instance, typed
//! fields, indirect access.

use crate::common;

use am_autogen::regs::{FieldError, RegIp};
use am_driver::regs::{RegTable, Regs, gc, select_table};
use am_driver::{Discovery, Error, ErrorKind, HwIp, IpVersion};
use common::*;

fn open(table: &[u8]) -> (FakeDevice, Regs) {
    let dev = FakeDevice::new(256, 256 << 20, table);
    let d = Discovery::read(&dev).unwrap();
    let regs = Regs::new(&dev, &d).unwrap();
    (dev, regs)
}

#[test]
fn gc_11_scratch_reg7_is_at_base_1_plus_offset() {
    let (dev, regs) = open(&navi31_like());
    let r = regs.reg(gc::SCRATCH_REG7).unwrap();
    // GC 11.0.0: SCRATCH_REG7 is offset 0x2047 in segment 1; discovery gave base 1 = 0xa000.
    assert_eq!(r.addr(0).unwrap(), 0xa000 + 0x2047);
    r.write(0, 0xa000_0008).unwrap();
    assert_eq!(dev.bar5.regs.lock().unwrap()[0xa000 + 0x2047], 0xa000_0008);
    assert_eq!(r.read(0).unwrap(), 0xa000_0008);
}

#[test]
fn gc_9_4_3_resolves_one_address_per_xcc() {
    let (_dev, regs) = open(&mi300x_like(&[]));
    let r = regs.reg(gc::SCRATCH_REG7).unwrap();
    for xcc in 0..8u8 {
        assert_eq!(
            r.addr(xcc).unwrap(),
            0xa000 + u64::from(xcc) * 0x20000 + 0x2047,
            "XCC {xcc}"
        );
    }
    // GRBM_GFX_CNTL moved between versions: segment 0, offset 0x22 on GC 9.4.3.
    assert_eq!(
        regs.reg(gc::GRBM_GFX_CNTL).unwrap().addr(1).unwrap(),
        0x1260 + 0x22
    );
}

#[test]
fn absent_register_error_names_register_and_version() {
    let (_dev, regs) = open(&mi300x_like(&[]));
    let err = regs.reg(gc::RLC_RLCS_BOOTLOAD_STATUS).err().unwrap();
    assert!(matches!(
        err,
        Error {
            kind: ErrorKind::NoSuchRegister { .. },
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "fake:0: register RLC_RLCS_BOOTLOAD_STATUS does not exist on GC 9.4.3"
    );
    assert!(!regs.has(gc::RLC_RLCS_BOOTLOAD_STATUS));
    // The same name exists on GC 11.0.0.
    let (_dev, regs11) = open(&navi31_like());
    assert!(regs11.has(gc::RLC_RLCS_BOOTLOAD_STATUS));
}

#[test]
fn typed_fields_encode_decode_and_get() {
    let (_dev, regs) = open(&navi31_like());
    let reg = gc::GRBM_GFX_CNTL;
    let e = regs
        .encode(reg, |f| f.meid(1).pipeid(2).queueid(3).ctxid(7))
        .unwrap();
    assert_eq!(e.value, (1 << 2) | 2 | (3 << 8) | (7 << 11));
    assert_eq!(e.mask, 0x3fff & !0xf0);
    assert_eq!(
        regs.reg(reg).unwrap().decode(e.value),
        vec![
            ("PIPEID", 2),
            ("MEID", 1),
            ("VMID", 0),
            ("QUEUEID", 3),
            ("CTXID", 7)
        ]
    );
    assert_eq!(regs.get(reg, e.value, |f| f.queueid(0)).unwrap(), 3);
    assert_eq!(regs.get(reg, e.value, |f| f.ctxid(0)).unwrap(), 7);
    let mask = regs.encode(reg, |f| f.pipeid(0).vmid(0)).unwrap().mask;
    assert_eq!(mask, 0xf3);
}

#[test]
fn field_errors_name_register_field_and_version() {
    let (_dev, regs) = open(&mi300x_like(&[]));
    let reg = gc::GRBM_GFX_CNTL;
    // CTXID is a GC 11 field.
    let err = regs.encode(reg, |f| f.ctxid(1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "fake:0: register GRBM_GFX_CNTL has no field CTXID on GC 9.4.3"
    );
    let err = regs.get(reg, 0, |f| f.ctxid(0)).unwrap_err();
    assert!(
        err.to_string().ends_with("has no field CTXID on GC 9.4.3"),
        "{err}"
    );
    let err = regs.encode(reg, |f| f.pipeid(4)).unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::Field(FieldError::Overflow {
                    width: 2,
                    value: 4,
                    ..
                }),
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn an_encoded_mask_changes_only_the_named_fields() {
    let (dev, regs) = open(&navi31_like());
    let reg = gc::GRBM_GFX_CNTL;
    let r = regs.reg(reg).unwrap();
    let addr = r.addr(0).unwrap() as usize;
    dev.bar5.regs.lock().unwrap()[addr] = 0xffff_0000 | (5 << 4) | 1;
    let e = regs.encode(reg, |f| f.queueid(6).pipeid(2)).unwrap();
    let written = r.read(0).unwrap() & !e.mask | e.value;
    r.write(0, written).unwrap();
    assert_eq!(written, 0xffff_0000 | (6 << 8) | (5 << 4) | 2);
    assert_eq!(dev.bar5.regs.lock().unwrap()[addr], written);
}

#[test]
fn harvested_instance_has_no_address() {
    let (_dev, regs) = open(&mi300x_like(&[(GC_HWID, 2)]));
    let r = regs.reg(gc::SCRATCH_REG7).unwrap();
    let msg = r.addr(2).unwrap_err().to_string();
    assert!(msg.contains("GC 9.4.3 instance 2 is not present"), "{msg}");
    assert!(msg.contains("0, 1, 3, 4, 5, 6, 7"), "{msg}");
    assert_eq!(regs.instances(HwIp::GC).len(), 7);
}

#[test]
fn table_selection_takes_exact_else_newest_same_major_not_newer() {
    let v = |t: Option<&RegTable>| t.map(|t| t.version());
    // Exact tables.
    assert_eq!(
        v(select_table(RegIp::Gc, IpVersion::new(11, 0, 0))),
        Some(IpVersion::new(11, 0, 0))
    );
    assert_eq!(
        v(select_table(RegIp::Gc, IpVersion::new(9, 5, 0))),
        Some(IpVersion::new(9, 5, 0))
    );
    // No table of its own: the newest older one of the same major.
    assert_eq!(
        v(select_table(RegIp::Gc, IpVersion::new(11, 0, 3))),
        Some(IpVersion::new(11, 0, 0))
    );
    assert_eq!(
        v(select_table(RegIp::Gc, IpVersion::new(9, 4, 4))),
        Some(IpVersion::new(9, 4, 3))
    );
    // The generated alias: MP 13.0.14 uses MP 13.0.6.
    assert_eq!(
        v(select_table(RegIp::Mp, IpVersion::new(13, 0, 14))),
        Some(IpVersion::new(13, 0, 6))
    );
    // Nothing of that major, or only newer ones.
    assert_eq!(v(select_table(RegIp::Gc, IpVersion::new(13, 0, 0))), None);
    assert_eq!(v(select_table(RegIp::Gc, IpVersion::new(9, 0, 0))), None);
}

#[test]
fn block_without_table_is_an_error_naming_its_version() {
    let t = build_table(
        &[vec![ip(GC_HWID, 0, (13, 0, 0), &[0x1260, 0xa000])]],
        false,
        &[],
        Gc::None,
    );
    let (_dev, regs) = open(&t);
    let msg = regs.reg(gc::SCRATCH_REG7).err().unwrap().to_string();
    assert_eq!(msg, "fake:0: no generated register table for GC 13.0.0");
}

#[test]
fn registers_past_bar5_go_through_rsmu() {
    let (dev, regs) = open(&navi31_like());
    // NBIO 4.3.0: RSMU_INDEX/DATA are offsets 0/1 of segment 1 (base 0x14).
    let far = (MMIO_DWORDS as u64) + 0x100;
    dev.bar5.regs.lock().unwrap()[0x15] = 0x1234_5678;
    assert_eq!(regs.rreg(far).unwrap(), 0x1234_5678);
    assert_eq!(
        dev.bar5.writes.lock().unwrap().as_slice(),
        &[(0x14, (far * 4) as u32)]
    );
    dev.bar5.writes.lock().unwrap().clear();
    regs.wreg(far, 0xdead_beef).unwrap();
    assert_eq!(
        dev.bar5.writes.lock().unwrap().as_slice(),
        &[(0x14, (far * 4) as u32), (0x15, 0xdead_beef)]
    );
}

#[test]
fn rsmu_index_past_32_bits_is_an_error() {
    let (_dev, regs) = open(&navi31_like());
    let err = regs.rreg(1 << 31).unwrap_err();
    assert!(
        matches!(
            err,
            Error {
                kind: ErrorKind::RegisterOutOfReach { .. },
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn pcie_index2_carries_the_aid_in_the_high_index() {
    let (dev, regs) = open(&mi300x_like(&[]));
    assert_eq!(Regs::pcie_index2_addr(0x1234, 0), 0x1234 * 4);
    assert_eq!(
        Regs::pcie_index2_addr(0x1234, 3),
        (0x1234 * 4) | (3 << 32) | (1 << 34)
    );
    // NBIO 7.9.0: PCIE_INDEX2 0xe, DATA2 0xf, INDEX2_HI 0x11 in segment 0 (base 0).
    regs.wreg_pcie(0x1234, 2, 0xff).unwrap();
    assert_eq!(
        dev.bar5.writes.lock().unwrap().as_slice(),
        &[(0xe, 0x1234 * 4), (0x11, (2 | 4)), (0xf, 0xff), (0x11, 0)]
    );
    dev.bar5.writes.lock().unwrap().clear();
    dev.bar5.regs.lock().unwrap()[0xf] = 77;
    assert_eq!(regs.rreg_pcie(0x40, 0).unwrap(), 77);
    // AID 0 needs no high index.
    assert_eq!(dev.bar5.writes.lock().unwrap().as_slice(), &[(0xe, 0x100)]);
}

mod roundtrip {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Every field decodes to what was encoded, on both GC versions.
        #[test]
        fn encode_then_decode_gives_the_fields_back(
            navi in any::<bool>(),
            pipe in 0u32..4, me in 0u32..4, vmid in 0u32..16, queue in 0u32..8,
        ) {
            let (_dev, regs) = open(&if navi { navi31_like() } else { mi300x_like(&[]) });
            let reg = gc::GRBM_GFX_CNTL;
            let e = regs.encode(reg, |f| f.pipeid(pipe).meid(me).vmid(vmid).queueid(queue)).unwrap();
            prop_assert_eq!(regs.get(reg, e.value, |f| f.pipeid(0)).unwrap(), pipe);
            prop_assert_eq!(regs.get(reg, e.value, |f| f.meid(0)).unwrap(), me);
            prop_assert_eq!(regs.get(reg, e.value, |f| f.vmid(0)).unwrap(), vmid);
            prop_assert_eq!(regs.get(reg, e.value, |f| f.queueid(0)).unwrap(), queue);
            prop_assert_eq!(e.value & !e.mask, 0);
        }
    }
}
