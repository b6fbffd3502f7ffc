//! Discovery and registers of the driver against the mock profiles: the driver's parser
//! reads the mock's generated tables, and register addresses the driver resolves land on
//! the registers the mock's own map places there.

use am_autogen::regs::RegIp;
use am_driver::regs::{Regs, gc};
use am_driver::{Discovery, HwIp, IpVersion, PciDevice};
use am_mock::{MockGpu, Mode};

fn open(profile: &str) -> (MockGpu, std::sync::Arc<am_mock::MockDevice>) {
    let gpu = MockGpu::with_mode(profile, 0, Mode::Strict).unwrap();
    let dev = gpu.open();
    (gpu, dev)
}

#[test]
fn every_pf_profile_parses_without_contract_violations() {
    for (profile, gc_version, xccs, cus) in [
        ("navi31", IpVersion::new(11, 0, 0), 1, 96),
        ("mi300x", IpVersion::new(9, 4, 3), 8, 320),
    ] {
        let (gpu, dev) = open(profile);
        let d = Discovery::read(&*dev).unwrap();
        assert_eq!(d.version(HwIp::GC), Some(gc_version), "{profile}");
        assert_eq!(d.xcc_count(), xccs, "{profile}");
        assert_eq!(d.cu_count(), Some(cus), "{profile}");
        assert!(d.table.checksum_valid, "{profile}");
        assert_eq!(gpu.violations(), vec![], "{profile}");
    }
}

#[test]
fn scratch_reg7_of_each_xcc_is_that_xccs_register_in_the_mock() {
    let (gpu, dev) = open("mi300x");
    let d = Discovery::read(&*dev).unwrap();
    let regs = Regs::new(&*dev, &d).unwrap();
    let r = regs.reg(gc::SCRATCH_REG7).unwrap();
    for xcc in regs.instances(HwIp::GC) {
        r.write(xcc, 0x5000 + u32::from(xcc)).unwrap();
    }
    for xcc in 0..8u8 {
        assert_eq!(
            gpu.peek(RegIp::Gc, "SCRATCH_REG7", xcc),
            Some(0x5000 + u32::from(xcc))
        );
        assert_eq!(r.read(xcc).unwrap(), 0x5000 + u32::from(xcc));
    }
    assert_eq!(gpu.violations(), vec![]);
}

#[test]
fn typed_fields_are_the_bits_the_mock_holds() {
    let (gpu, dev) = open("navi31");
    let d = Discovery::read(&*dev).unwrap();
    let regs = Regs::new(&*dev, &d).unwrap();
    let reg = gc::GRBM_GFX_CNTL;
    let value = regs
        .encode(reg, |f| f.meid(1).pipeid(3).queueid(5))
        .unwrap();
    regs.reg(reg).unwrap().write(0, value.value).unwrap();
    let held = gpu.peek(RegIp::Gc, "GRBM_GFX_CNTL", 0).unwrap();
    assert_eq!(held, (1 << 2) | 3 | (5 << 8));
    assert_eq!(value.mask, 0b1111 | (0b111 << 8));
    assert_eq!(regs.get(reg, held, |f| f.queueid(0)).unwrap(), 5);
    assert_eq!(regs.get(reg, held, |f| f.meid(0)).unwrap(), 1);
    assert_eq!(
        regs.reg(reg).unwrap().decode(held)[..4],
        [("PIPEID", 3), ("MEID", 1), ("VMID", 0), ("QUEUEID", 5)]
    );
}

#[test]
fn register_gc_9_4_3_lacks_is_an_error_naming_the_version() {
    let (_gpu, dev) = open("mi300x");
    let d = Discovery::read(&*dev).unwrap();
    let regs = Regs::new(&*dev, &d).unwrap();
    let msg = regs
        .reg(gc::RLC_RLCS_BOOTLOAD_STATUS)
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.ends_with("register RLC_RLCS_BOOTLOAD_STATUS does not exist on GC 9.4.3"),
        "{msg}"
    );
}

#[test]
fn vf_discovery_is_gated_until_the_pf_grants_access() {
    let (gpu, dev) = open("mi350x-vf");
    assert!(am_driver::vf::is_vf(&*dev.bar(5).unwrap()).unwrap());
    let msg = Discovery::read(&*dev).unwrap_err().to_string();
    assert!(msg.contains("gated"), "{msg}");
    gpu.grant_vf_access(true);
    let d = Discovery::read(&*dev).unwrap();
    assert_eq!(d.version(HwIp::GC), Some(IpVersion::new(9, 5, 0)));
    assert_eq!(d.reserved_vram_size(), 384 << 20);
    assert!(dev.name().starts_with("mock:mi350x-vf"));
}
