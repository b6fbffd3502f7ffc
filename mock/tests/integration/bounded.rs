//! A mock served for a long time stays bounded: what it records for tests is capped, and no
//! size a driver writes into a register reaches an allocation unchecked.

use am_autogen::hwid::{MP0_HWID, MP1_HWID};
use am_autogen::regs::{RegIp, table};
use am_autogen::smu::v13_0_0 as s0;
use am_driver::PciDevice;
use am_mock::{MAX_VIOLATIONS, MockGpu};

/// BAR5 byte offset of an MP register on `gpu`.
fn mp_reg(gpu: &MockGpu, hwid: u16, name: &str) -> u64 {
    let ver = gpu.profile().version(hwid).unwrap();
    let r = table(RegIp::Mp, ver).unwrap().by_name(name).unwrap();
    let i = gpu.profile().instances(hwid).next().unwrap();
    (i.bases[usize::from(r.base_idx())] + u64::from(r.offset())) * 4
}

#[test]
fn the_violation_list_is_capped_and_the_count_kept() {
    let gpu = MockGpu::new("navi31").unwrap();
    let bar5 = gpu.open().bar(5).unwrap();
    let n = MAX_VIOLATIONS as u64 * 3 + 7;
    for i in 0..n {
        // A dword of no IP segment: refused and recorded every time.
        let err = bar5.read32(0x3ffff * 4).unwrap_err();
        assert!(err.to_string().contains("0x3ffff"), "read {i}: {err}");
    }
    assert_eq!(gpu.violation_count(), n, "every violation is counted");
    let kept = gpu.violations();
    assert_eq!(kept.len(), MAX_VIOLATIONS, "only the latest are kept");
    assert_eq!(gpu.take_violations().len(), MAX_VIOLATIONS);
    assert_eq!(gpu.violation_count(), 0, "taking them resets the count");
}

#[test]
fn a_huge_psp_ring_size_is_refused_before_anything_is_allocated() {
    let gpu = MockGpu::new("navi31").unwrap();
    let dev = gpu.open();
    let bar5 = dev.bar(5).unwrap();
    let reg = |n: u32| mp_reg(&gpu, MP0_HWID, &format!("MP0_SMN_C2PMSG_{n}"));
    gpu.run_foreign_firmware();
    // The size the hostile client wrote: 4 GiB less one frame.
    bar5.write32(reg(69), 0).unwrap();
    bar5.write32(reg(70), 0).unwrap();
    bar5.write32(reg(71), 0xffff_ffc0).unwrap();
    let err = bar5.write32(reg(64), 2 << 16).unwrap_err().to_string();
    assert!(
        err.contains("size C2PMSG_71 = 0xffffffc0 is larger than the 0x10000 bytes the PSP takes"),
        "{err}"
    );
}

#[test]
fn the_smu_log_stays_bounded_however_many_messages_come() {
    let gpu = MockGpu::new("navi31").unwrap();
    let bar5 = gpu.open().bar(5).unwrap();
    let reg = |n: u32| mp_reg(&gpu, MP1_HWID, &format!("MP1_SMN_C2PMSG_{n}"));
    gpu.run_foreign_firmware();
    for _ in 0..20_000 {
        bar5.write32(reg(90), 0).unwrap();
        bar5.write32(reg(82), 0).unwrap();
        bar5.write32(reg(66), s0::PPSMC_MSG_GetSmuVersion).unwrap();
        assert_eq!(bar5.read32(reg(90)).unwrap(), 1);
    }
    let kept = gpu.with_smu(|s| s.log().len());
    assert!(
        (4096..=8192).contains(&kept),
        "the SMU log keeps the latest messages, not all 20000: {kept}"
    );
}
